--[[
  Claims an idempotency key: writes an in_progress record owned by the claimant unless a live record exists.

  KEYS[1] the record (a hash)
  ARGV[1] scope
  ARGV[2] key (as stored; for operators, never part of a key name)
  ARGV[3] owner token
  ARGV[4] lease, ms
  ARGV[5] fingerprint ('' when payloads are not compared)
  ARGV[6] job id ('' when unknown)
  ARGV[7] the job's Redis key ('' when unknown; the orphan reaper checks it)
  ARGV[8] the job's creation time, BullMQ's `timestamp` ('' when unknown): with its key, this job and not a later one
          given the same id
  ARGV[9] the job's resume token ('' when none): a live in_progress record owned by it was handed over to this job
          between two of its steps, and is taken over

  Returns {1, takeover (0/1), resumed (0/1): a record handed over to this job, later step (0/1): the claim of a
  delivery of this job that had resumed one, taken over after that delivery's worker died} when claimed, else {0, ms
  until the live record ends, {field, value, …}, own (0/1): the record is the claimant's job's}.
]]
--- @include "includes/nowMs"
--- @include "includes/keepClaim"
local record = KEYS[1]
local lease = tonumber(ARGV[4])
local now = nowMs()

local current = redis.call('HMGET', record, 'state', 'until', 'attempts', 'created', 'fp', 'jobKey', 'jobAt', 'owner',
  'step')
local state, expiresAt = current[1], tonumber(current[2])

-- Whether the record is the claimant's job's: the same Redis key (queue and id) and the same creation time, all known.
-- (A job id alone would not do: two queues sharing a scope both have a job "5"; nor a key alone: a producer's jobId is
-- given again to a new job once the first is removed.)
local function namesClaimant()
  local jobKey, jobAt = current[6], current[7]
  return jobKey and jobAt and ARGV[7] ~= '' and ARGV[8] ~= '' and jobKey == ARGV[7] and jobAt == ARGV[8]
end

-- A record handed over between two steps of the claimant's job (owned by the job's resume token) is the job's own.
local resumed = state == 'in_progress' and ARGV[9] ~= '' and current[8] == ARGV[9]

if state and expiresAt and expiresAt > now and not resumed then
  return {0, expiresAt - now, redis.call('HGETALL', record), namesClaimant() and 1 or 0}
end

-- An ended claim of another payload is not taken over: that delivery is a mismatch, not a retry. Unless it is the
-- claimant's own job, delivered again after its worker died: its data may have changed since (job.updateData, BullMQ's
-- step jobs), it is still the same job. (The record itself lives ten minutes past its lease: after that any payload
-- may claim the key.)
if state == 'in_progress' and current[5] and ARGV[5] ~= '' and current[5] ~= ARGV[5] and not namesClaimant()
  and not resumed then
  return {0, 0, redis.call('HGETALL', record)}
end

-- Absent, or no longer live: an in_progress record whose lease ended is taken over (its holder crashed or stalled).
local takeover = state == 'in_progress'
local attempts = 1
local created = now
if takeover then
  attempts = (tonumber(current[3]) or 0) + 1
  created = tonumber(current[4]) or now
end
-- Replaced whole: no field of an earlier record stays. One HSET: each call inside a script costs the server about as
-- much as a small command.
redis.call('DEL', record)
local fields = {'scope', ARGV[1], 'key', ARGV[2], 'state', 'in_progress', 'owner', ARGV[3], 'until', now + lease,
  'attempts', attempts, 'created', created}
-- The claimant's own ended claim keeps the fingerprint it was first claimed with: that of the payload the producer
-- sent, not of what the handler made of the job's data since (a later delivery of that payload by another job is then
-- a duplicate, not a mismatch).
local fp = ARGV[5]
if takeover and current[5] and (namesClaimant() or resumed) then fp = current[5] end
if fp ~= '' then fields[#fields + 1] = 'fp'; fields[#fields + 1] = fp end
-- A later step of the job ('step' = 1 in the record): resumed now, or resumed by a delivery of this job whose worker
-- died mid-step (BullMQ delivers the job again at the step its data names). A retried failure of it hands the claim
-- over again rather than releasing it: released, a duplicate could run the job's first step.
local laterStep = resumed or (takeover and current[9] == '1' and namesClaimant())
if laterStep then fields[#fields + 1] = 'step'; fields[#fields + 1] = 1 end
if ARGV[6] ~= '' then fields[#fields + 1] = 'job'; fields[#fields + 1] = ARGV[6] end
if ARGV[7] ~= '' then fields[#fields + 1] = 'jobKey'; fields[#fields + 1] = ARGV[7] end
if ARGV[8] ~= '' then fields[#fields + 1] = 'jobAt'; fields[#fields + 1] = ARGV[8] end
redis.call('HSET', record, unpack(fields))
keepClaim(record, lease)
return {1, takeover and 1 or 0, resumed and 1 or 0, (laterStep and not resumed) and 1 or 0}
