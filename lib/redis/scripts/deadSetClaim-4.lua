--[[
  Claims a dead-set entry for a retry: takes it out of the index (so two concurrent retries never both re-enqueue it,
  and the list no longer shows it) but keeps its JSON, recording the claim with a lease; deadSetSettle ends the claim,
  and a claim never settled puts its entry back once its lease ends (here and in deadSetList). The claim's first write
  is a deletion, so a full Redis (maxmemory reached) allows it. An entry older than maxAge is dropped, not claimed.

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims (sorted set: `<id>|<score in the index>` -> end of the claim's lease, ms)
  ARGV[1] entry id
  ARGV[2] maxAge, ms (0: not known to the caller, the CLI: no entry is too old)
  ARGV[3] lease of the claim, ms

  Returns the entry JSON and its score in the index (the time it was added by Redis' clock, which a retry that fails
  puts it back with), or nil when there is no such entry in the index (none, claimed by another retry, or older than
  maxAge: dropped).
]]
--- @include "includes/nowMs"
--- @include "includes/deadSetEntries"
local index, entries, counter, claims = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local maxAge = tonumber(ARGV[2])
local now = nowMs()
local json = redis.call('HGET', entries, id)
local stored = redis.call('ZSCORE', index, id)
if json and stored and maxAge > 0 and tonumber(stored) <= now - maxAge then
  -- As old as the list's bound (it shows entries strictly younger than maxAge): gone.
  dropDeadEntry(index, entries, counter, id, json)
  return nil
end
if json and stored then
  redis.call('ZREM', index, id)
end
returnStaleRetries(index, entries, claims, now)
if not (json and stored) then
  return nil
end
local lease = tonumber(ARGV[3])
redis.call('ZADD', claims, now + lease, id .. '|' .. stored)
redis.call('PEXPIRE', claims, math.max(redis.call('PTTL', entries), lease))
return { json, stored }
