--[[
  Reads the oldest live holder of a counted lock (a sorted set of owners scored by lease expiry), without changing it.

  KEYS[1] the lock

  Returns {holder, ms until its lease ends}, or false when no lease is live.
]]
--- @include "includes/nowMs"
local now = nowMs()
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if not live[1] then
  return false
end
return {live[1], tonumber(live[2]) - now}
