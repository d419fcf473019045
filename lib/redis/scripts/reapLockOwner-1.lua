--[[
  Removes one owner of a lock only if the owner still holds the very slot that was read or taken: same member, same
  lease expiry. A re-taken or renewed slot is left alone. Used for an owner found orphaned (its job is gone or
  finished, or was just removed through a guarded queue: a new job with the same id keeps its slot) and for a run-time
  lock given back after an attempt (a delivery of the same job recovered elsewhere after a stall re-took the slot with
  a lease of its own: the stalled delivery's release leaves it alone).

  KEYS[1] the lock (a sorted set: member = owner (a job id; for a run-time lock across queues, its queue and id), score = lease expiry)
  ARGV[1] owner
  ARGV[2] the score read (or returned by the take or last renewal)

  Returns 1 when removed, 0 otherwise. (Redis deletes the sorted set with its last member.)
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
