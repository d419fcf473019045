--[[
  Extends the owner's in_progress lease. The owner keeps its claim while nobody took it over, even if a renewal came late.

  KEYS[1] the record
  ARGV[1] owner token
  ARGV[2] lease, ms

  Returns 1 when renewed, 0 when the owner no longer holds the key.
]]
--- @include "includes/nowMs"
--- @include "includes/keepClaim"
--- @include "includes/ownsClaim"
local record = KEYS[1]
local lease = tonumber(ARGV[2])
if not ownsClaim(record, ARGV[1]) then
  return 0
end
redis.call('HSET', record, 'until', nowMs() + lease)
keepClaim(record, lease)
return 1
