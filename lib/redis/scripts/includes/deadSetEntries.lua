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

-- A retry's claim of an entry (deadSetClaim): its member in the claims, `<id>|<score in the index>|<JSON>`.
local function deadClaim(id, since, json)
  return id .. '|' .. since .. '|' .. json
end

-- Puts back the entries whose retry was claimed and never settled (its process died, or its enqueue outlasted the
-- claim's lease), as old as they were: a retry never loses an entry. The bounds are the next add's to apply. At most
-- 100 a call; each begins with a deletion (the claim's), which a full Redis allows, and so the writes after it.
local function returnStaleRetries(index, entries, counter, claims, now)
  -- The claims keep the expiry the entries had when claimed (read before the last claim's deletion deletes the key).
  local ttl = redis.call('PTTL', claims)
  if ttl <= 0 then ttl = 86400000 end
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', claims, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', claims, member)
    local id, since, json = string.match(member, '^([^|]*)|([^|]*)|(.*)$')
    if id and tonumber(since) and redis.call('HEXISTS', entries, id) == 0 then
      redis.call('HSET', entries, id, json)
      redis.call('ZADD', index, since, id)
      if redis.call('EXISTS', counter) == 1 then redis.call('INCRBY', counter, string.len(json)) end
      for _, key in ipairs({ index, entries, counter }) do
        if redis.call('PTTL', key) == -1 then redis.call('PEXPIRE', key, ttl) end
      end
    end
  end
end
