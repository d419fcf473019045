--[[
  Releases a fast-path enqueue lock (a BullMQ deduplication key set by the library) whose job no longer exists or has
  finished: the job was deleted outside BullMQ's own removal, or the library's release after it never happened.
  BullMQ writes the key and the job in one script, so a key whose job is missing is never a lock being taken. A key
  whose job has finished may be one: a guarded `job.retry()` takes the key back for its job before BullMQ moves the job
  out of completed or failed, so the reaper confirms such a key after its grace ('2').

  KEYS[1] the deduplication key (<queue prefix>:<queue>:de:uj:<digest>)
  ARGV[1] the queue's job key prefix (<queue prefix>:<queue>:); same hash tag as the key on Redis Cluster
  ARGV[2] '1' for a dry run (report only); '2': delete only a key whose job is gone (report a finished one); '0': delete

  Returns {holder job id, reason} when orphaned (and deleted as ARGV[2] says), false otherwise.
]]
local holder = redis.call('GET', KEYS[1])
if not holder then
  return false
end
local job = ARGV[1] .. holder
local reason
if redis.call('EXISTS', job) == 0 then
  reason = 'job gone'
elseif redis.call('HEXISTS', job, 'finishedOn') == 1 then
  reason = 'job finished'
else
  return false
end
if ARGV[2] == '0' or (ARGV[2] == '2' and reason == 'job gone') then
  redis.call('DEL', KEYS[1])
end
return {holder, reason}
