--[[
  Renews an owner's lease, only if the owner still holds the lock.

  KEYS[1] the lock
  ARGV[1] owner
  ARGV[2] lease, ms

  Returns 1 when renewed, 0 when the owner no longer holds the lock (its lease ended or it was released).
]]
--- @include "includes/nowMs"
--- @include "includes/extendKeyTtl"
local key = KEYS[1]
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
local now = nowMs()

local expiry = redis.call('ZSCORE', key, owner)
if not expiry or tonumber(expiry) <= now then
  return 0
end
redis.call('ZADD', key, 'XX', now + lease, owner)
extendKeyTtl(key, lease)
return 1
