--[[
  Takes one of `limit` slots of a lock for an owner, with a lease.
  The lock is a sorted set: member = owner (an enqueue lock's: a job id; a run-time lock's: its queue's tag and job id), score = the owner's lease expiry (server ms).
  Expired leases (crashed holders) are dropped first; the same owner taking it again renews its lease.

  KEYS[1] the lock
  ARGV[1] owner
  ARGV[2] lease, ms
  ARGV[3] limit (holders admitted)
  ARGV[4] '1': re-entrant (an owner that holds a slot takes it again: a retried or recovered job; but a run-time slot
          marked 1022/1024, whose handler runs on after its worker closed with force); '0': an owner that holds a slot is
          answered as the holder (a new job reusing the id of one that still holds its lock)
  ARGV[5] optional: this take's mark, a fraction k/1024 (0 < k < 1024) added to the lease expiry. Renewals keep it, so
          a renewal or release that names it changes the slot only while no other take of the same owner (a job
          recovered elsewhere after a stall) has taken it since, whatever answers were lost. (Exact in a double until
          2^43 ms, the year 2248.)
  ARGV[6] optional: the member an earlier build wrote for the same owner (a run-time lock's: the bare job id, or the
          queue-name pair of a lock across queues): a slot held under it is the owner's, taken over under ARGV[1]
          (re-entrant takes only); '': none
  ARGV[7] optional, an enqueue lock's slot (its full lock's answer names no parked slots: an enqueue lock parks none):
          'keep': the job re-entering its slot keeps the slot's mark (a removal of the job that read the slot releases
          it by that mark), the mark ARGV[5] is a new slot's only; 'new': a slot taken again is a new job's (one added
          with the id of a job gone), marked ARGV[5] whether the owner held it or not (another mark than the held
          slot's when ARGV[5] is that one)

  Returns {1, owner} when held ({1, owner, 1} when the owner re-entered a slot parked for a step job's next delivery:
  its score carried the parked mark, 1023/1024), {0, oldest holder, ms until its lease ends} when full; with a mark
  (ARGV[5]: a run-time lock's take), followed by the member and score, as stored, of each slot parked for a step job's
  next delivery among the first 100 (at most 10): the caller may give back one whose job has finished. A 'keep' take
  (ARGV[7]) that holds answers {1, owner, 0, the mark its slot carries} (`0` for a slot an earlier build took).
]]
--- @include "includes/nowMs"
--- @include "includes/extendKeyTtl"
local key = KEYS[1]
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local mark = tonumber(ARGV[5] or '0')
local keepMark = ARGV[7] == 'keep'
local enqueueSlot = keepMark or ARGV[7] == 'new'
local now = nowMs()

-- No lock yet, the usual case: taken with the fewest calls (each call inside a script costs the server about as much
-- as a small command). The same as the path below for the leases (> 0) and limits (>= 1) the callers validate.
if limit > 0 and redis.call('EXISTS', key) == 0 then
  redis.call('ZADD', key, now + lease + mark, owner)
  redis.call('PEXPIRE', key, lease)
  if keepMark then
    return {1, owner, 0, ARGV[5]}
  end
  return {1, owner}
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local own = redis.call('ZSCORE', key, owner)
-- Not re-entered: a new job reusing the id of one that holds its lock ('0'), or a run-time slot whose handler runs on
-- after its worker closed with force (its mark, 1022/1024: the copy BullMQ recovers from that worker waits for its end).
-- Asked of the owner's own member only, before an earlier build's member is taken over (those builds wrote no such
-- mark on purpose).
if own and (ARGV[4] == '0' or (mark > 0 and not enqueueSlot and math.fmod(tonumber(own), 1) == 1022 / 1024)) then
  return {0, owner, tonumber(own) - now}
end
if not own and ARGV[6] and ARGV[6] ~= '' and ARGV[4] == '1' then
  own = redis.call('ZSCORE', key, ARGV[6])
  if own then
    redis.call('ZREM', key, ARGV[6])
  end
end
if own or redis.call('ZCARD', key) < limit then
  local fraction = mark
  if own and keepMark then
    fraction = math.fmod(tonumber(own), 1)
  elseif own and enqueueSlot and math.fmod(tonumber(own), 1) == mark then
    -- A new job's take of a slot its id holds never draws that slot's mark: a removal of the job before it, which
    -- read the slot, releases by that mark.
    fraction = (math.fmod(mark * 1024, 1022) + 1) / 1024
  end
  redis.call('ZADD', key, now + lease + fraction, owner)
  extendKeyTtl(key, lease)
  if own and math.fmod(tonumber(own), 1) == 1023 / 1024 then
    return {1, owner, 1}
  end
  if keepMark then
    return {1, owner, 0, tostring(fraction)}
  end
  return {1, owner}
end
-- The oldest holder; with a run-time lock's mark, read with the first 100 slots, among which the parked ones are looked
-- for.
local scanParked = mark > 0 and not enqueueSlot
local slots = redis.call('ZRANGE', key, 0, scanParked and 99 or 0, 'WITHSCORES')
local answer = {0, slots[1], tonumber(slots[2]) - now}
if scanParked then
  for i = 1, #slots, 2 do
    if math.fmod(tonumber(slots[i + 1]), 1) == 1023 / 1024 then
      table.insert(answer, slots[i])
      table.insert(answer, slots[i + 1])
      if #answer >= 23 then break end
    end
  end
end
return answer
