--[[
  Reads the oldest live holder of a counted lock (a sorted set of owners scored by lease expiry), without changing it.

  KEYS[1] the lock

  Returns the holder's id, or false when no lease is live.
]]
--- @include "includes/nowMs"
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. nowMs(), '+inf', 'LIMIT', 0, 1)
return live[1] or false
