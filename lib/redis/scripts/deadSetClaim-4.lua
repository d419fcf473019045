--[[
  Claims a dead-set entry for a retry: takes it out of the dead set (so two concurrent retries never both re-enqueue
  it, and the bounds count it no more, as if deleted) into a claim with a lease, which deadSetSettle ends (the entry
  removed, or put back); a claim never settled puts its entry back once its lease ends (here and in deadSetList). Its
  first write is a deletion, so a full Redis (maxmemory reached) allows it. An entry older than maxAge is dropped, not
  claimed.

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims (sorted set: `<id>|<score in the index>|<JSON>` -> end of the claim's lease, ms)
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
if json and stored then
  local ttl = math.max(redis.call('PTTL', entries), 1)
  dropDeadEntry(index, entries, counter, id, json)
  -- As old as the list's bound (it shows entries strictly younger than maxAge): gone.
  if maxAge > 0 and tonumber(stored) <= now - maxAge then
    returnStaleRetries(index, entries, counter, claims, now)
    return nil
  end
  local lease = tonumber(ARGV[3])
  redis.call('ZADD', claims, now + lease, deadClaim(id, stored, json))
  redis.call('PEXPIRE', claims, math.max(ttl, lease))
end
returnStaleRetries(index, entries, counter, claims, now)
if json and stored then
  return { json, stored }
end
return nil
