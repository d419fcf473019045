--[[
  Marks a job as removed by this caller (the `replace` strategy), so that of producers removing one holder at once
  exactly one reports it: a field of the job's hash holding the server time, set only while the job exists and no
  caller marked it in the last `window` ms (a caller whose removal then failed does not keep others from reporting it
  for long). The field goes with the hash when the job is removed.

  KEYS[1] the job's hash (`<queue prefix>:<queue>:<job id>`)
  ARGV[1] the field (`ujRemoving`)
  ARGV[2] window, ms

  Returns 1 when this caller marked it, 0 when another did within the window or the job does not exist.
]]
--- @include "includes/nowMs"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local now = nowMs()
local at = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if at and now - at < tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], now)
return 1
