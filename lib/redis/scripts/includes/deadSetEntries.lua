-- Removes a dead-set entry whose JSON is `json`: from the index and the entries, its length off the byte counter
-- (deleted with the last entry, so an empty dead set leaves no key). Its first write is a deletion.
local function dropDeadEntry(index, entries, counter, id, json)
  redis.call('HDEL', entries, id)
  redis.call('ZREM', index, id)
  if redis.call('HLEN', entries) == 0 then
    redis.call('DEL', counter)
  elseif redis.call('EXISTS', counter) == 1 then
    -- Without a counter there is nothing to correct: the next add counts the hash again.
    if redis.call('DECRBY', counter, string.len(json)) < 0 then
      redis.call('DEL', counter)
    end
  end
end

-- A retry's claim of an entry (deadSetClaim): its member in the claims, `<id>|<score in the index>|<token>|<JSON>`,
-- the token the claiming retry's own (random), so that a retry whose claim lapsed never renews or ends another's.
local function deadClaim(id, since, token, json)
  return id .. '|' .. since .. '|' .. token .. '|' .. json
end

-- The dead set's bounds, as deadSetAdd takes them (maxSize, maxAge, maxBytes, expiry when maxAge is 0), from
-- ARGV[first] on.
local function deadBounds(first)
  return { tonumber(ARGV[first]), tonumber(ARGV[first + 1]), tonumber(ARGV[first + 2]), tonumber(ARGV[first + 3]) }
end

-- Puts an entry whose retry was claimed back, as old as it was (`since`), through the bounds (addDeadEntry: the
-- oldest, it may be the one dropped). Called after the claim's deletion, so a full Redis allows it. A dead set with no
-- key left keeps the expiry the claims had (`claimsTtl`, read before that deletion) unless maxAge sets one. Returns
-- addDeadEntry's answer (-1: the entry alone is over maxBytes, not put back).
local function putBackDeadEntry(index, entries, counter, id, since, json, bounds, claimsTtl)
  local expiry = bounds[4]
  if claimsTtl > 0 then expiry = claimsTtl end
  return addDeadEntry(index, entries, counter, id, json, bounds[1], bounds[2], bounds[3], expiry, since)
end

-- Puts back the entries whose retry was claimed and never settled (its process died, or its claim was not renewed):
-- a retry never loses an entry. At most 100 a call; each begins with a deletion (the claim's), which a full Redis
-- allows, and so the writes after it. Called first by every script that reads or takes an entry.
local function returnStaleRetries(index, entries, counter, claims, now, bounds)
  local claimsTtl = redis.call('PTTL', claims)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', claims, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', claims, member)
    local id, since, json = string.match(member, '^([^|]*)|([^|]*)|[^|]*|(.*)$')
    if id and tonumber(since) and redis.call('HEXISTS', entries, id) == 0 then
      if putBackDeadEntry(index, entries, counter, id, since, json, bounds, claimsTtl) == -1 then
        redis.log(redis.LOG_WARNING, 'unique-jobs: dead-set entry ' .. id .. ' dropped: alone over maxBytes')
      end
    end
  end
end
