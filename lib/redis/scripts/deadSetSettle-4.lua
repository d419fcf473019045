--[[
  Ends a retry's claim of a dead-set entry (deadSetClaim). Its enqueue done, the entry is gone (also when the claim's
  lease ended first and it went back to the dead set: it is taken out again). Its enqueue failed, the entry is put back
  as old as it was, through the bounds as deadSetAdd puts an entry back (the oldest, it may be the one dropped), unless
  its lease ended and it went back already. The first write is a deletion (the claim's), so a full Redis allows the
  put-back (what made the enqueue fail, often).

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims
  ARGV[1] entry id
  ARGV[2] its score in the index, as the claim returned it
  ARGV[3] its JSON, as the claim returned it
  ARGV[4] 'enqueued' or 'failed'
  ARGV[5..8] for a put-back: maxSize, maxAge, maxBytes and the expiry when maxAge is 0, as deadSetAdd takes them

  Returns 1 when the claim was still held, else 0.
]]
--- @include "includes/nowMs"
--- @include "includes/deadSetEntries"
--- @include "includes/addDeadEntry"
local index, entries, counter, claims = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, since, json = ARGV[1], ARGV[2], ARGV[3]
local held = redis.call('ZREM', claims, deadClaim(id, since, json))
if ARGV[4] == 'enqueued' then
  if held == 0 and redis.call('ZSCORE', index, id) then
    dropDeadEntry(index, entries, counter, id, redis.call('HGET', entries, id) or '')
  end
elseif held == 1 then
  addDeadEntry(index, entries, counter, id, json, tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]),
    tonumber(ARGV[8]), since)
end
return held
