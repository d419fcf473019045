-- Adds (or puts back) a dead-set entry and keeps the set bounded: see deadSetAdd for the arguments and the answer.
local function addDeadEntry(index, entries, counter, id, json, maxSize, maxAge, maxBytes, defaultTtl, sinceArg)
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
  local since = tonumber(sinceArg)
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
    if ttl <= 0 then ttl = defaultTtl end
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
end
