--[[
  Moves the end of a deduplication key's TTL, for its holder only: the job's run time changed (a retry's backoff,
  changeDelay, promote), and a lock with lockTtl lives lockTtl past the run time. A key without TTL (the lock lives as
  long as its job) is left as it is. A TTL that would end the key sooner than it ends now is set only while the job
  still is the one the caller read: the key's value is the job id, the same for a job removed and added again with it
  meanwhile, whose lock must not end before it runs; its hash's timestamp (when it was added) tells them apart.

  KEYS[1] the deduplication key
  KEYS[2] the job's hash (in the key's slot, as BullMQ's own scripts use them together)
  ARGV[1] owner job id
  ARGV[2] the new TTL, ms
  ARGV[3] when the new TTL ends the key sooner: 'never' (left as it is), or the job's timestamp as read before the move

  Returns 1 when moved, 0 otherwise.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then
  return 0
end
if tonumber(ARGV[2]) < ttl and (ARGV[3] == 'never' or redis.call('HGET', KEYS[2], 'timestamp') ~= ARGV[3]) then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
