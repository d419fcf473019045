--[[
  Reads who holds a BullMQ deduplication key, without adding anything: the cheap answer to a duplicate enqueue of a
  digest this process has recently seen held. Mirrors BullMQ's own check: a key without TTL whose job no longer exists
  is stale (BullMQ's next add replaces it), so it counts as not held.

  KEYS[1] the deduplication key (<queue prefix>:<queue>:de:<id>)
  ARGV[1] the queue's job key prefix (<queue prefix>:<queue>:)

  Returns the holder's job id, or false when the key is free or stale.

  The holder's job hash (ARGV[1] .. holder) cannot be declared in KEYS: the holder is only known once the key is read.
  It shares KEYS[1]'s slot whenever the queue's keys do (BullMQ's own add script reads it the same way), which Redis
  Cluster requires of BullMQ anyway: a hash-tagged prefix such as `{bull}`, or a hash-tagged queue name.
]]
local holder = redis.call('GET', KEYS[1])
if not holder then
  return false
end
if redis.call('PTTL', KEYS[1]) == -1 and redis.call('EXISTS', ARGV[1] .. holder) == 0 then
  return false
end
return holder
