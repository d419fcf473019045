--[[
  Reads who holds BullMQ deduplication keys of one queue, without adding anything: the cheap answer to duplicate
  enqueues of digests this process has recently seen held, for every such enqueue asked in one tick. Mirrors BullMQ's
  own check: a key without TTL whose job no longer exists is stale (BullMQ's next add replaces it), so it counts as not
  held.

  KEYS     the deduplication keys (<queue prefix>:<queue>:de:<id>), all of one queue
  ARGV[1]  the queue's job key prefix (<queue prefix>:<queue>:)

  Returns, key by key, the holder's job id, or false when the key is free or stale.

  The holder's job hash (ARGV[1] .. holder) cannot be declared in KEYS: the holder is only known once the key is read.
  It shares the keys' slot whenever the queue's keys do (BullMQ's own add script reads it the same way), which Redis
  Cluster requires of BullMQ anyway: a hash-tagged prefix such as `{bull}`, or a hash-tagged queue name.
]]
local holders = {}
for i = 1, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if holder and redis.call('PTTL', KEYS[i]) == -1 and redis.call('EXISTS', ARGV[1] .. holder) == 0 then
    holder = false
  end
  holders[i] = holder
end
return holders
