--[[
  Releases a job's general-path enqueue slot at the end of an attempt, before BullMQ records the end: only while the
  attempt's worker still runs the job (its `<job>:lock` holds the attempt's token). A worker that stalled past BullMQ's
  job lock (the job recovered, waiting or running elsewhere, under the same id: the same owner) leaves the slot to that
  run; BullMQ refuses that worker's record of the end the same way. Sent only where both keys live on one server (not
  on a Cluster, where they hash to different slots).

  KEYS[1] the slot set (the enqueue lock)
  KEYS[2] the job's lock (<queue prefix>:<queue>:<job id>:lock)
  ARGV[1] the owner (the job id)
  ARGV[2] the attempt's BullMQ lock token

  Returns 1 when the slot was released, 0 otherwise.
]]
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
return redis.call('ZREM', KEYS[1], ARGV[1])
