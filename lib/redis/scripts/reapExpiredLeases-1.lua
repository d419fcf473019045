--[[
  Drops the holders of a lock (run-time or general-path enqueue lock) whose lease has ended: they crashed or their job
  is gone. Acquire does the same lazily; the reaper does it for locks nobody asks for any more.

  KEYS[1] the lock (a sorted set: member = owner (a job id; for a run-time lock across queues, its queue and id), score = lease expiry, server ms)
  ARGV[1] '1' for a dry run (report only)

  Returns the expired owners (at most 100 are listed; all are dropped).
]]
--- @include "includes/nowMs"
local now = nowMs()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
if ARGV[1] ~= '1' and #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
end
return expired
