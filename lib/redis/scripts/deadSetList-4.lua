--[[
  Lists dead-set entries, newest first, leaving out those older than maxAge (they are dropped at the next add), and
  counts the live ones. First puts back the entries whose retry was claimed and never settled (deadSetClaim).

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims of retries
  ARGV[1] offset (an integer >= 0, passed on as given)
  ARGV[2] limit (an integer >= 0, passed on as given; 0: count only). The entries are read in chunks of 1,000, so
          any limit works (Lua's unpack has a bound of a few thousand values).
  ARGV[3..6] the bounds, as deadSetClaim takes them (for claims put back); maxAge (0: not known to the caller, the CLI:
             no entry is left out by age) also decides which entries are listed

  Returns {count, id, entry JSON, id, entry JSON, ...} (the id with each entry: a value that is not an entry's JSON
  can still be named, and deleted).
]]
--- @include "includes/nowMs"
--- @include "includes/addDeadEntry"
--- @include "includes/deadSetEntries"
local bounds = deadBounds(3)
returnStaleRetries(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs(), bounds)
local maxAge = bounds[2]
local from = '-inf'
if maxAge > 0 then from = '(' .. (nowMs() - maxAge) end
local count = redis.call('ZCOUNT', KEYS[1], from, '+inf')
local result = {count}
if tonumber(ARGV[2]) > 0 then
  local ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', from, 'LIMIT', ARGV[1], ARGV[2])
  for first = 1, #ids, 1000 do
    local last = math.min(first + 999, #ids)
    local values = redis.call('HMGET', KEYS[2], unpack(ids, first, last))
    for i = 1, last - first + 1 do
      if values[i] then
        table.insert(result, ids[first + i - 1])
        table.insert(result, values[i])
      end
    end
  end
end
return result
