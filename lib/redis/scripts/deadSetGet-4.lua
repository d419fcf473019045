--[[
  Reads one dead-set entry, unless it is older than maxAge (the list leaves it out; the next add drops it). First puts
  back the entries whose retry was claimed and never settled (deadSetClaim).

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims of retries
  ARGV[1] entry id
  ARGV[2..5] the bounds, as deadSetClaim takes them (for claims put back); maxAge (0: not known to the caller, the CLI:
             no entry is too old) also decides whether the entry is too old to be read

  Returns the entry JSON, or nil when there is no such entry (or it is older than maxAge).
]]
--- @include "includes/nowMs"
--- @include "includes/addDeadEntry"
--- @include "includes/deadSetEntries"
local bounds = deadBounds(2)
returnStaleRetries(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs(), bounds)
local json = redis.call('HGET', KEYS[2], ARGV[1])
local maxAge = bounds[2]
if json and maxAge > 0 then
  local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
  if score and score <= nowMs() - maxAge then
    return nil
  end
end
return json
