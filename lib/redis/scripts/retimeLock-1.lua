--[[
  Moves the end of an enqueue slot's lease for a job whose run time moved (a retry's backoff, a handler's or a user's
  move), keeping the slot's mark. A move that would end the slot sooner than it ends now is made only when the caller
  can tell the slot is still the one of the job it moved: a job removed and added again with the same id meanwhile
  holds a slot of its own (another mark), which a sooner end would let expire before that job runs.

  KEYS[1] the lock
  ARGV[1] owner
  ARGV[2] lease, ms
  ARGV[3] when the new end is sooner: 'never' (left as it is), or the slot's lease as read before the move
          (made only while the slot still has that lease's mark; a lease without a mark, an earlier build's: only while
          it is that very lease)

  Returns 1 when moved, 0 otherwise (the owner holds no live slot, or a sooner end was not made).
]]
--- @include "includes/nowMs"
local key = KEYS[1]
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
local sooner = ARGV[3]
local now = nowMs()

local expiry = tonumber(redis.call('ZSCORE', key, owner) or '0')
if expiry <= now then
  return 0
end
local mark = math.fmod(expiry, 1)
local moved = now + lease + mark
if moved < expiry then
  local read = tonumber(sooner)
  if not read then
    return 0
  end
  local readMark = math.fmod(read, 1)
  if (readMark == 0 and read ~= expiry) or (readMark ~= 0 and readMark ~= mark) then
    return 0
  end
end
-- Its first write never grows memory (see renewLock).
redis.call('PEXPIRE', key, math.max(redis.call('PTTL', key), lease))
redis.call('ZADD', key, 'XX', moved, owner)
return 1
