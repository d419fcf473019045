--[[
  Gives back an owner's slot of a lock, only if the owner holds it by the take that marked it (see acquireLock's
  ARGV[5]): a worker that stalled past BullMQ's job lock, its job re-taken elsewhere, leaves that take's slot alone.

  KEYS[1] the lock
  ARGV[1] owner
  ARGV[2] the take's mark (the fraction of its lease expiry)
  ARGV[3] optional: the member an earlier build wrote for the same owner, given back when ARGV[1] is not

  Returns 1 when removed, 0 otherwise. (Redis deletes the sorted set with its last member.)
]]
local function marked(member)
  local score = redis.call('ZSCORE', KEYS[1], member)
  return score and math.fmod(tonumber(score), 1) == tonumber(ARGV[2])
end

if marked(ARGV[1]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
if ARGV[3] and marked(ARGV[3]) then
  return redis.call('ZREM', KEYS[1], ARGV[3])
end
return 0
