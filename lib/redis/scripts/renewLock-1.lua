--[[
  Renews an owner's lease, only if the owner still holds the lock (and, when ARGV[3] is given, holds it with that lease
  expiry: the one its holder last wrote, so that a delivery whose slot another delivery of the same job re-took after a
  stall does not renew the other's).

  KEYS[1] the lock
  ARGV[1] owner
  ARGV[2] lease, ms
  ARGV[3] optional: the lease expiry the owner's slot must hold (server ms, as the take or last renewal returned it)

  Returns the new lease expiry (server ms, > 0) when renewed, 0 when the owner no longer holds the lock (its lease
  ended, it was released, or another delivery re-took it).
]]
--- @include "includes/nowMs"
local key = KEYS[1]
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
local now = nowMs()

local expiry = redis.call('ZSCORE', key, owner)
if not expiry or tonumber(expiry) <= now or (ARGV[3] and tonumber(expiry) ~= tonumber(ARGV[3])) then
  return 0
end
-- Its first write never grows memory: at maxmemory (policy noeviction) Redis refuses a script at a write that can grow
-- memory only when the script has written nothing before it, so a renewal (which adds no memory) lands when Redis is full.
redis.call('PEXPIRE', key, math.max(redis.call('PTTL', key), lease))
redis.call('ZADD', key, 'XX', now + lease, owner)
return now + lease
