--[[
  Deletes the owner's in_progress record, so the next delivery claims the key.

  KEYS[1] the record
  ARGV[1] owner token

  Returns 1 when released, 0 when the owner no longer holds the key.
]]
--- @include "includes/ownsClaim"
if not ownsClaim(KEYS[1], ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
