--[[
  Deletes an in-progress idempotency record the reaper found orphaned (its job gone or finished, its lease ended),
  only if it is still that claim: same owner token, still in progress, lease still ended.

  KEYS[1] the record (a hash)
  ARGV[1] owner token the reaper read
  ARGV[2] 1: the token is a resume token (the claim is parked between two steps of its job: no handler runs), deleted
          whatever its lease

  Returns 1 when deleted, 0 otherwise.
]]
--- @include "includes/nowMs"
local current = redis.call('HMGET', KEYS[1], 'state', 'owner', 'until')
if current[1] == 'in_progress' and current[2] == ARGV[1]
  and (ARGV[2] == '1' or (tonumber(current[3]) or 0) <= nowMs()) then
  return redis.call('DEL', KEYS[1])
end
return 0
