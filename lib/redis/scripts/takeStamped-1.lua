--[[
  Takes one of `limit` slots of a counted lock (a sorted set of owners scored by lease expiry, like acquireLock's) for a
  new owner named by the server time of the take and an id: `<ms>:<id>`, so that readers can tell how long it has held
  its slot however often its lease was renewed (holderAges). Expired leases are dropped first.

  KEYS[1] the lock
  ARGV[1] id (unique to this take)
  ARGV[2] lease, ms
  ARGV[3] limit (holders admitted)

  Returns the owner (`<ms>:<id>`), or false when `limit` holders have a live lease.
]]
--- @include "includes/nowMs"
--- @include "includes/extendKeyTtl"
local key = KEYS[1]
local lease = tonumber(ARGV[2])
local now = nowMs()
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= tonumber(ARGV[3]) then
  return false
end
local owner = string.format('%d:%s', now, ARGV[1])
redis.call('ZADD', key, now + lease, owner)
extendKeyTtl(key, lease)
return owner
