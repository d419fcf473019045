--[[
  Moves the end of a deduplication key's TTL, for its holder only: the job's run time changed (changeDelay, promote),
  and a lock with lockTtl lives lockTtl past the run time. A key without TTL (the lock lives as long as its job) is left
  as it is.

  KEYS[1] the deduplication key
  ARGV[1] owner job id
  ARGV[2] the new TTL, ms

  Returns 1 when moved, 0 otherwise.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('PTTL', KEYS[1]) > 0 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
