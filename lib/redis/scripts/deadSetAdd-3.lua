--[[
  Adds a rejected duplicate to the dead set and keeps the set bounded by age, entries and bytes: entries older than
  maxAge and the oldest entries beyond maxSize are dropped (at most 100 of each per call, so no call walks the whole
  set), then the oldest entries until the JSON of those left totals at most maxBytes. The byte total is kept in a
  counter (KEYS[3]) that every script removing an entry decrements by the length of the removed value; when it is
  missing (a dead set written before the counter existed, or the counter was deleted) it is counted again from the
  hash. All keys expire maxAge after the last add (by then every entry is too old anyway), so an idle dead set leaves
  nothing behind.

  KEYS[1] index (sorted set: entry id -> time added, ms)
  KEYS[2] entries (hash: entry id -> JSON)
  KEYS[3] byte counter (string: total length in bytes of the values of KEYS[2])
  ARGV[1] entry id
  ARGV[2] entry JSON
  ARGV[3] maxSize
  ARGV[4] maxAge, ms; 0 when the caller does not know it (the CLI putting back an entry whose retry failed): then no
          entry is dropped by age and no key's expiry is shortened (they keep the longest expiry among them, or
          ARGV[6] when none has one)
  ARGV[5] maxBytes
  ARGV[6] expiry when maxAge is 0 and no key has one, ms
  ARGV[7] when the entry is put back (its retry's enqueue failed): the score it had in the index (the time it was
          added, ms, by Redis' clock), so that it keeps its age (dropped by maxAge when it was first due to be, and
          first among the oldest: the bounds may drop it); empty for a new entry. One that is not a finite number, or
          ahead of now (Redis' clock went back), is scored as a new entry

  Returns the number of entries dropped, or -1 when the entry alone is over maxBytes: then it is not stored and
  nothing is dropped (the caller cuts entries to maxEntryBytes, at most maxBytes, before they get here).
]]
--- @include "includes/nowMs"
local index = KEYS[1]
local entries = KEYS[2]
local counter = KEYS[3]
local id = ARGV[1]
local json = ARGV[2]
local maxSize = tonumber(ARGV[3])
local maxAge = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local now = nowMs()

if string.len(json) > maxBytes then
  return -1
end

local total = tonumber(redis.call('GET', counter))
if not total or total < 0 then
  total = 0
  for _, field in ipairs(redis.call('HKEYS', entries)) do
    total = total + redis.call('HSTRLEN', entries, field)
  end
end

-- Scores strictly increase, so "oldest first" is the order of addition even for entries added in the same ms.
local since = tonumber(ARGV[7])
local putBack = since ~= nil and since == since and since > -math.huge and since <= now
local score = since
if not putBack then
  score = now
  local newest = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
  if newest[2] and tonumber(newest[2]) >= score then
    score = tonumber(newest[2]) + 0.001
  end
end
total = total - redis.call('HSTRLEN', entries, id) + string.len(json)
redis.call('ZADD', index, score, id)
redis.call('HSET', entries, id, json)

local dropped = 0
local function drop(old)
  local bytes = redis.call('HSTRLEN', entries, old)
  redis.call('ZREM', index, old)
  if redis.call('HDEL', entries, old) == 1 then
    total = total - bytes
  end
  dropped = dropped + 1
end

local ttl = maxAge
if maxAge > 0 then
  for _, old in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now - maxAge, 'LIMIT', 0, 100)) do
    drop(old)
  end
else
  ttl = math.max(redis.call('PTTL', index), redis.call('PTTL', entries), redis.call('PTTL', counter))
  if ttl <= 0 then ttl = tonumber(ARGV[6]) end
end
local excess = redis.call('ZCARD', index) - maxSize
if excess > 0 then
  for _, old in ipairs(redis.call('ZRANGE', index, 0, math.min(excess, 100) - 1)) do
    drop(old)
  end
end
-- Oldest first until the total fits; never a new entry (it alone fits, checked above), but one put back is as old as
-- it was, dropped in its turn (as the entry count bound drops it).
while total > maxBytes do
  local oldest = redis.call('ZRANGE', index, 0, 99)
  local before = dropped
  for _, old in ipairs(oldest) do
    if total <= maxBytes then break end
    if old ~= id or putBack then drop(old) end
  end
  if dropped == before then break end
end

if redis.call('HLEN', entries) == 0 then
  redis.call('DEL', counter)
else
  redis.call('SET', counter, total, 'PX', ttl)
end
redis.call('PEXPIRE', index, ttl)
redis.call('PEXPIRE', entries, ttl)
return dropped
