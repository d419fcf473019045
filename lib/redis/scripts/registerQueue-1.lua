--[[
  Records a queue the library guards, in the registry the CLI reads instead of scanning the whole key space for
  BullMQ's `meta` keys. Bounded: past ARGV[2] names, new ones are not recorded (the CLI then scans, as without one).

  KEYS[1] the registry (a set of qualified queue names, `<BullMQ prefix>:<queue>`)
  ARGV[1] the qualified queue name
  ARGV[2] how many names the registry keeps at most

  Returns 1 when the name is recorded (now or before), 0 when the registry is full.
]]
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  return 1
end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
