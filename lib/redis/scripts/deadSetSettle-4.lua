--[[
  Renews or ends a retry's claim of a dead-set entry (deadSetClaim), named by the retry's token: a claim that lapsed
  and was taken by another retry is not this one's. Renewed, its lease runs `lease` ms from now (the enqueue is still
  under way). Its enqueue done, the entry is gone (also when the claim's lease ended first and it
  went back to the dead set: it is taken out again). Its enqueue failed, the entry is put back as old as it was,
  through the bounds as deadSetAdd puts an entry back (the oldest, it may be the one dropped), unless its lease ended
  and it went back already. The first write is a deletion (the claim's), so a full Redis allows the put-back (what
  made the enqueue fail, often).

  KEYS[1] index
  KEYS[2] entries
  KEYS[3] byte counter
  KEYS[4] claims
  ARGV[1] entry id
  ARGV[2] its score in the index, as the claim returned it
  ARGV[3] its JSON, as the claim returned it
  ARGV[4] 'renew', 'enqueued' or 'failed'
  ARGV[5..8] the bounds, as deadSetClaim takes them
  ARGV[9] for 'renew': the lease, ms
  ARGV[10] the claiming retry's token

  Returns 1 when the claim was still held, else 0; -1 when a put-back was refused for its size (alone over maxBytes).
]]
--- @include "includes/nowMs"
--- @include "includes/addDeadEntry"
--- @include "includes/deadSetEntries"
local index, entries, counter, claims = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, since, json, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local member = deadClaim(id, since, ARGV[10], json)
if outcome == 'renew' then
  -- Taken out and written again: a deletion first, which a full Redis allows (a renewal refused there would let the
  -- claim lapse while the enqueue runs, and another retry take the entry).
  -- The claims key keeps its expiry (the dead set's, which a put-back may need), at least a lease.
  local ttl = redis.call('PTTL', claims)
  if redis.call('ZREM', claims, member) == 0 then return 0 end
  local lease = tonumber(ARGV[9])
  redis.call('ZADD', claims, nowMs() + lease, member)
  redis.call('PEXPIRE', claims, math.max(ttl, lease))
  return 1
end
local claimsTtl = redis.call('PTTL', claims)
local held = redis.call('ZREM', claims, member)
if outcome == 'enqueued' then
  if held == 0 and redis.call('ZSCORE', index, id) then
    dropDeadEntry(index, entries, counter, id, redis.call('HGET', entries, id) or '')
  end
elseif held == 1 then
  if putBackDeadEntry(index, entries, counter, id, since, json, deadBounds(5), claimsTtl) == -1 then
    return -1
  end
end
return held
