-- Removes a dead-set entry whose JSON is `json`: from the index and the entries, its length off the byte counter
-- (deleted with the last entry, so an empty dead set leaves no key).
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

-- Puts an entry whose retry was claimed back in the index, as old as it was (`since`, its score there), unless it was
-- deleted meanwhile. The index gets the entries' expiry back when it was emptied (deleted) by the claim. Only after a
-- write of the calling script (a ZREM of the claim), so that a full Redis allows it: Redis refuses a script's first
-- write that may grow memory when it is at maxmemory, and allows the ones after it.
local function putBackDeadEntry(index, entries, id, since)
  if redis.call('HEXISTS', entries, id) == 0 then return end
  redis.call('ZADD', index, since, id)
  if redis.call('PTTL', index) == -1 then
    local ttl = redis.call('PTTL', entries)
    if ttl > 0 then redis.call('PEXPIRE', index, ttl) end
  end
end

-- Puts back the entries whose retry was claimed and never settled (its process died, or its enqueue outlasted the
-- claim's lease): a retry never loses an entry. At most 100 a call. A claim's member is `<id>|<score in the index>`.
local function returnStaleRetries(index, entries, retrying, now)
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', retrying, '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', retrying, member)
    local id, since = string.match(member, '^(.*)|([^|]*)$')
    if id and tonumber(since) then putBackDeadEntry(index, entries, id, since) end
  end
end
