--[[
  Claims a dead-set entry for a retry: takes it out of the dead set (so two concurrent retries never both re-enqueue
  it, and the bounds count it no more, as if deleted) into a claim with a lease, which the retry renews while its
  enqueue runs and deadSetSettle ends (the entry removed, or put back); a claim not renewed puts its entry back once
  its lease ends (first thing in every dead-set script that reads or takes an entry). Its first write is a deletion,
  so a full Redis (maxmemory reached) allows it. An entry older than maxAge is dropped, not claimed.

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims (sorted set: `<id>|<score in the index>|<token>|<JSON>` -> end of the claim's lease, ms)
  ARGV[1] entry id
  ARGV[2] lease of the claim, ms
  ARGV[3..6] the bounds: maxSize, maxAge (0: not known to the caller, the CLI: no entry is too old), maxBytes, and the
             expiry when maxAge is 0, as deadSetAdd takes them (for claims put back)
  ARGV[7] the claiming retry's token (random, no `|`)

  Returns the entry JSON and its score in the index (the time it was added by Redis' clock, which a retry that fails
  puts it back with), or nil when there is no such entry in the index (none, claimed by another retry, or older than
  maxAge: dropped).
]]
--- @include "includes/nowMs"
--- @include "includes/addDeadEntry"
--- @include "includes/deadSetEntries"
local index, entries, counter, claims = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local bounds = deadBounds(3)
local now = nowMs()
returnStaleRetries(index, entries, counter, claims, now, bounds)
local json = redis.call('HGET', entries, id)
local stored = redis.call('ZSCORE', index, id)
if not (json and stored) then
  return nil
end
local ttl = math.max(redis.call('PTTL', entries), 1)
dropDeadEntry(index, entries, counter, id, json)
-- As old as the list's bound (it shows entries strictly younger than maxAge): gone.
if bounds[2] > 0 and tonumber(stored) <= now - bounds[2] then
  return nil
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', claims, now + lease, deadClaim(id, stored, ARGV[7], json))
redis.call('PEXPIRE', claims, math.max(ttl, redis.call('PTTL', claims), lease))
return { json, stored }
