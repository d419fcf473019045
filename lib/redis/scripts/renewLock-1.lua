--[[
  Renews an owner's lease, only if the owner still holds the lock by the take that marked it so (see acquireLock's
  ARGV[5]; a take of the same owner re-taken after a stall is not renewed). An enqueue slot whose job's run time moved
  is moved by retimeLock instead.

  KEYS[1] the lock
  ARGV[1] owner
  ARGV[2] lease, ms
  ARGV[3] the take's mark (the fraction of its lease expiry), kept by the renewal
  ARGV[4] optional: a new mark for the slot instead (a run-time lock parked for a step job's next delivery); '': none
  ARGV[5] optional: the member an earlier build wrote for the same owner, renewed (as it is) when ARGV[1] is not

  Returns 1 when renewed, 0 when the owner no longer holds the lock (its lease ended, it was released, or another take
  of it holds the slot).
]]
--- @include "includes/nowMs"
local key = KEYS[1]
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
local mark = tonumber(ARGV[3])
local newMark = mark
if ARGV[4] and ARGV[4] ~= '' then
  newMark = tonumber(ARGV[4])
end
local now = nowMs()

local function held(member)
  local expiry = redis.call('ZSCORE', key, member)
  if expiry and tonumber(expiry) > now and math.fmod(tonumber(expiry), 1) == mark then
    return tonumber(expiry)
  end
  return nil
end

local expiry = held(owner)
if not expiry then
  expiry = ARGV[5] and held(ARGV[5])
  if not expiry then
    return 0
  end
  owner = ARGV[5]
end
-- Its first write never grows memory: at maxmemory (policy noeviction) Redis refuses a script at a write that can grow
-- memory only when the script has written nothing before it, so a renewal (which adds no memory) lands when Redis is
-- full.
redis.call('PEXPIRE', key, math.max(redis.call('PTTL', key), lease))
redis.call('ZADD', key, 'XX', now + lease + newMark, owner)
return 1
