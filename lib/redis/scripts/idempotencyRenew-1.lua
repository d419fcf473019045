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
-- Its first write never grows memory: at maxmemory (policy noeviction) Redis refuses a script at a write that can grow
-- memory only when the script has written nothing before it, so a renewal (which adds no memory) lands when Redis is
-- full.
keepClaim(record, lease)
redis.call('HSET', record, 'until', nowMs() + lease)
return 1
