--[[
  Releases an owner's slot of a lock; only the owner's own slot is ever removed.

  KEYS[1] the lock
  ARGV[1] owner

  Returns 1 when the owner held a slot, 0 otherwise.
]]
local key = KEYS[1]
local removed = redis.call('ZREM', key, ARGV[1])
if removed == 1 and redis.call('ZCARD', key) == 0 then
  redis.call('DEL', key)
end
return removed
