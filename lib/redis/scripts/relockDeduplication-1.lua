--[[
  Takes BullMQ's deduplication key back for a job that will run again (an `until_executing` lock re-taken when an
  attempt fails and will be retried). A key held by another live job is left alone; a key without TTL whose job is
  gone is stale and taken over, as BullMQ's own add script does.

  KEYS[1] the deduplication key (<queue prefix>:<queue>:de:<id>)
  ARGV[1] owner job id
  ARGV[2] ttl ms (0: none)
  ARGV[3] the queue's job key prefix (<queue prefix>:<queue>:)
  ARGV[4] '1': only while the owner job is still there, BullMQ has not finished it (no `finishedOn`) and no other
          worker runs it (its `<job>:lock` is absent or holds ARGV[5]). A worker re-takes the key for a job it ran; if
          that job was moved on first (a handler that moved it to delayed and threw DelayedError) it may be running
          again elsewhere, or have ended, before the re-take lands (a command that waited out a reconnection): taking
          the key then would leave it held by a finished job, or by a running one that gave it up at its start.
  ARGV[5] the attempt's BullMQ lock token (with ARGV[4])

  Returns 1 when the job holds the key, 0 when another job does, 2 when (ARGV[4]) the owner job has ended, is gone or
  runs elsewhere: nothing is taken.

  The holder's job hash (ARGV[3] .. holder) cannot be declared in KEYS: the holder is only known once the key is read.
  It shares KEYS[1]'s slot whenever the queue's keys do (BullMQ's own add script reads it the same way), which Redis
  Cluster requires of BullMQ anyway: a hash-tagged prefix such as `{bull}`, or a hash-tagged queue name.
]]
local key = KEYS[1]
local owner = ARGV[1]
local ttl = tonumber(ARGV[2])

local function take()
  if ttl > 0 then
    redis.call('SET', key, owner, 'PX', ttl)
  else
    redis.call('SET', key, owner)
  end
  return 1
end

if ARGV[4] == '1' then
  local job = redis.call('HMGET', ARGV[3] .. owner, 'timestamp', 'finishedOn')
  if not job[1] or job[2] then
    return 2
  end
  local runner = redis.call('GET', ARGV[3] .. owner .. ':lock')
  if runner and runner ~= ARGV[5] then
    return 2
  end
end

local holder = redis.call('GET', key)
if not holder then
  return take()
end
if holder == owner then
  return 1
end
if redis.call('PTTL', key) == -1 and redis.call('EXISTS', ARGV[3] .. holder) == 0 then
  return take()
end
return 0
