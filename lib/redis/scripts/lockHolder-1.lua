--[[
  Reads the live holders of a counted lock (a sorted set of owners scored by lease expiry), oldest lease end first,
  without changing it.

  KEYS[1] the lock
  ARGV[1] how many holders at most (1 when absent)

  Returns {holder, ms until its lease ends, holder, ms, …} (empty when no lease is live).
]]
--- @include "includes/nowMs"
local now = nowMs()
local limit = tonumber(ARGV[1]) or 1
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
for i = 2, #live, 2 do
  live[i] = tonumber(live[i]) - now
end
return live
