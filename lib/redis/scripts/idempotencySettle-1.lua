--[[
  Ends the owner's claim: completed (with the handler's result) or failed (with its error), kept for a retention period.

  KEYS[1] the record
  ARGV[1] owner token
  ARGV[2] new state: 'completed' or 'failed'
  ARGV[3] 1 when ARGV[4] holds a value, 0 for none (a handler that returned undefined)
  ARGV[4] the result or the error, as JSON text
  ARGV[5] retention, ms

  Returns 1 when settled, 0 when the owner no longer holds the key (nothing written).
]]
--- @include "includes/nowMs"
--- @include "includes/ownsClaim"
local record = KEYS[1]
local ttl = tonumber(ARGV[5])
if not ownsClaim(record, ARGV[1]) then
  return 0
end
-- Its first write never grows memory: at maxmemory (policy noeviction) Redis refuses a script at a write that can grow
-- memory only when the script has written nothing before it, so an outcome lands when Redis is full (refused, the
-- effect that ran would run again).
redis.call('PEXPIRE', record, ttl)
redis.call('HSET', record, 'state', ARGV[2], 'until', nowMs() + ttl)
if ARGV[3] == '1' then
  redis.call('HSET', record, ARGV[2] == 'completed' and 'result' or 'error', ARGV[4])
end
return 1
