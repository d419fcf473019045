--[[
  Ends a retry's claim of a dead-set entry (deadSetClaim). Its enqueue done, the entry is removed wherever it is (its
  claim, or the index it went back to when the claim's lease ended first). Its enqueue failed, the entry is put back
  in the index as old as it was, unless its lease ended and it went back already (or it was deleted meanwhile). The
  first write is a deletion, so a full Redis allows a put-back (what made the enqueue fail, often).

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims
  ARGV[1] entry id
  ARGV[2] its score in the index, as the claim returned it
  ARGV[3] 'enqueued' or 'failed'

  Returns 1 when the claim was still held, else 0.
]]
--- @include "includes/deadSetEntries"
local index, entries, counter, claims = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, since = ARGV[1], ARGV[2]
local held = redis.call('ZREM', claims, id .. '|' .. since)
if ARGV[3] == 'enqueued' then
  local json = redis.call('HGET', entries, id)
  if json then dropDeadEntry(index, entries, counter, id, json) end
elseif held == 1 then
  putBackDeadEntry(index, entries, id, since)
end
return held
