--[[
  Takes an entry out of the dead set atomically, so two concurrent retries never both re-enqueue it.

  KEYS[1] index
  KEYS[2] entries
  ARGV[1] entry id

  Returns the entry JSON, or nil when there is no such entry.
]]
local json = redis.call('HGET', KEYS[2], ARGV[1])
if json then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return json
