--[[
  Removes one owner of a lock found orphaned (its job is gone or finished, or was just removed through a guarded queue),
  only if the owner still holds the very slot that was read: same member, same lease expiry. A re-taken or renewed
  slot (a new job with the same id) is left alone.

  KEYS[1] the lock (a sorted set: member = owner (a job id; for a run-time lock across queues, its queue and id), score = lease expiry)
  ARGV[1] owner
  ARGV[2] the score read

  Returns 1 when removed, 0 otherwise. (Redis deletes the sorted set with its last member.)
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
