--[[
  Hands the owner's in_progress record over to its job's next delivery (a step job moved its job and ended the
  attempt): the record stays live, owned by the job's resume token, for the given lease. The claim of that delivery,
  sending the same token, takes it over; every other claim meets it live.

  KEYS[1] the record
  ARGV[1] owner token
  ARGV[2] the job's resume token (the new owner)
  ARGV[3] lease, ms

  Returns 1 when handed over, 0 when the owner no longer holds the key.
]]
--- @include "includes/nowMs"
--- @include "includes/keepClaim"
--- @include "includes/ownsClaim"
local record = KEYS[1]
local lease = tonumber(ARGV[3])
if not ownsClaim(record, ARGV[1]) then
  return 0
end
keepClaim(record, lease)
redis.call('HSET', record, 'owner', ARGV[2], 'until', nowMs() + lease)
return 1
