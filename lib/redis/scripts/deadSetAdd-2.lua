--[[
  Adds a rejected duplicate to the dead set and keeps the set bounded: entries older than maxAge and the oldest
  entries beyond maxSize are dropped, at most 100 of each per call so no call walks the whole set. Both keys expire
  maxAge after the last add (by then every entry is too old anyway), so an idle dead set leaves nothing behind.

  KEYS[1] index (sorted set: entry id -> time added, ms)
  KEYS[2] entries (hash: entry id -> JSON)
  ARGV[1] entry id
  ARGV[2] entry JSON
  ARGV[3] maxSize
  ARGV[4] maxAge, ms

  Returns the number of entries dropped.
]]
--- @include "includes/nowMs"
local index = KEYS[1]
local entries = KEYS[2]
local maxSize = tonumber(ARGV[3])
local maxAge = tonumber(ARGV[4])
local now = nowMs()

-- Scores strictly increase, so "oldest first" is the order of addition even for entries added in the same ms.
local score = now
local newest = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) >= score then
  score = tonumber(newest[2]) + 0.001
end
redis.call('ZADD', index, score, ARGV[1])
redis.call('HSET', entries, ARGV[1], ARGV[2])

local dropped = 0
local function drop(ids)
  for _, id in ipairs(ids) do
    redis.call('ZREM', index, id)
    redis.call('HDEL', entries, id)
    dropped = dropped + 1
  end
end

drop(redis.call('ZRANGEBYSCORE', index, '-inf', now - maxAge, 'LIMIT', 0, 100))
local excess = redis.call('ZCARD', index) - maxSize
if excess > 0 then
  drop(redis.call('ZRANGE', index, 0, math.min(excess, 100) - 1))
end
redis.call('PEXPIRE', index, maxAge)
redis.call('PEXPIRE', entries, maxAge)
return dropped
