-- Whether `owner` holds the in_progress claim of an idempotency record (compare-and-set guard of every change).
local function ownsClaim(record, owner)
  local current = redis.call('HMGET', record, 'state', 'owner')
  return current[1] == 'in_progress' and current[2] == owner
end
