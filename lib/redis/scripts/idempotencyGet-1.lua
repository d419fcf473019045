--[[
  Reads an idempotency record together with the clock of the Redis server that holds it. The record's times were
  written with that server's clock; on Redis Cluster a separate TIME call could reach another master, whose clock may
  differ, so the read and the clock come from one script on the record's node.

  KEYS[1] the record (a hash)

  Returns {now (server ms), field, value, …} (no fields when there is no record).
]]
--- @include "includes/nowMs"
return {nowMs(), redis.call('HGETALL', KEYS[1])}
