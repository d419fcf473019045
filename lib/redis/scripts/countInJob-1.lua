--[[
  Counts one more of something the library keeps in a job's hash (its reschedules, the steps its handler moved it
  through), only while the job exists: a job removed under its worker (e.g. `obliterate({ force: true })`) must not come
  back as a hash holding only that field.

  KEYS[1] the job's hash (`<queue prefix>:<queue>:<job id>`)
  ARGV[1] the field (`ujReschedules`, `ujSteps`)

  Returns the count, or 0 when the job is gone.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
