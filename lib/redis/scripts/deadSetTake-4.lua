--[[
  Takes an entry out of the dead set for good (`delete`; a retry claims it instead: deadSetClaim), and takes its
  length off the byte counter (deleted with the last entry, so an empty dead set leaves no key). An entry older than
  maxAge, which the list already leaves out, is dropped the same way but not returned: it is gone.

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims of retries (those never settled are put back first: deadSetClaim)
  ARGV[1] entry id
  ARGV[2..5] the bounds, as deadSetClaim takes them (for claims put back); maxAge (0: not known to the caller, the CLI:
             no entry is too old) also decides whether the entry taken is returned

  Returns the entry JSON and its score (as the index holds it: the time it was added by Redis' clock, which a retry
  that fails puts it back with; false when the index had no score for it), or nil when there is no such entry (or it
  was older than maxAge).
]]
--- @include "includes/nowMs"
--- @include "includes/addDeadEntry"
--- @include "includes/deadSetEntries"
local bounds = deadBounds(2)
returnStaleRetries(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs(), bounds)
local json = redis.call('HGET', KEYS[2], ARGV[1])
if json then
  local maxAge = bounds[2]
  local stored = redis.call('ZSCORE', KEYS[1], ARGV[1])
  local score = tonumber(stored)
  dropDeadEntry(KEYS[1], KEYS[2], KEYS[3], ARGV[1], json)
  -- As old as the list's bound (it shows entries strictly younger than maxAge).
  if maxAge > 0 and score and score <= nowMs() - maxAge then
    return nil
  end
  return { json, stored }
end
return nil
