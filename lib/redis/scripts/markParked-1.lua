--[[
  Marks a job's hash with the digest of the run-time lock slot its step is about to park (and counts the step, when
  asked), only while the job exists: a take or the orphan reaper that meets the parked slot tells its parker from a later
  job given the same id (see `readParkerStanding`). A job removed under its worker must not come back as a hash holding
  only these fields.

  KEYS[1] the job's hash (`<queue prefix>:<queue>:<job id>`)
  ARGV[1] the field naming the parked slot's digest (`ujParked`)
  ARGV[2] the digest
  ARGV[3] the field counting the job's steps (`ujSteps`), or '' to count none
  ARGV[4] BullMQ's field counting the job's starts (`ats`)
  ARGV[5] the starts the parking delivery read: a later delivery started since (the job was due at once) may have
          parked already, and its mark must stand

  Returns 1, or 0 when the job is gone or a later delivery started.
]]
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], ARGV[4]) ~= ARGV[5] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HINCRBY', KEYS[1], ARGV[3], 1)
end
return 1
