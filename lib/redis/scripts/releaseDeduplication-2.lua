--[[
  Releases BullMQ's deduplication key of a job at the end of an attempt, before BullMQ records the end: only while the
  attempt's worker still runs the job (its `<job>:lock` holds the attempt's token) and the key names the job. A worker
  that stalled past BullMQ's job lock (the job recovered, waiting or running elsewhere) leaves the key to that run;
  BullMQ refuses that worker's record of the end the same way.

  KEYS[1] the deduplication key (<queue prefix>:<queue>:de:<id>)
  KEYS[2] the job's lock (<queue prefix>:<queue>:<job id>:lock); in the queue's slot, as BullMQ requires of its keys
  ARGV[1] the job id
  ARGV[2] the attempt's BullMQ lock token

  Returns 1 when the key was deleted, 0 otherwise.
]]
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return 0
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
