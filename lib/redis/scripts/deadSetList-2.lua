--[[
  Lists dead-set entries, newest first, leaving out those older than maxAge (they are dropped at the next add), and
  counts the live ones.

  KEYS[1] index
  KEYS[2] entries
  ARGV[1] offset
  ARGV[2] limit (0: count only)
  ARGV[3] maxAge, ms (0: not known to the caller, the CLI: no entry is left out by age)

  Returns {count, entry JSON...}.
]]
--- @include "includes/nowMs"
local maxAge = tonumber(ARGV[3])
local from = '-inf'
if maxAge > 0 then from = '(' .. (nowMs() - maxAge) end
local count = redis.call('ZCOUNT', KEYS[1], from, '+inf')
local result = {count}
local limit = tonumber(ARGV[2])
if limit > 0 then
  local ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', from, 'LIMIT', tonumber(ARGV[1]), limit)
  if #ids > 0 then
    for _, json in ipairs(redis.call('HMGET', KEYS[2], unpack(ids))) do
      if json then table.insert(result, json) end
    end
  end
end
return result
