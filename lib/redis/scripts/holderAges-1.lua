--[[
  Reads the live holders of a counted lock taken by takeStamped (owners `<ms>:<id>`), each with how long ago it was
  taken (server clock), without changing the lock.

  KEYS[1] the lock
  ARGV[1] how many holders at most

  Returns {owner, ms since its take, owner, ms, …} (empty when no lease is live). An owner without a time of take is
  answered as taken at time 0 (as old as can be).
]]
--- @include "includes/nowMs"
local now = nowMs()
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
local answer = {}
for _, owner in ipairs(live) do
  answer[#answer + 1] = owner
  answer[#answer + 1] = now - (tonumber(string.match(owner, '^(%d+):')) or 0)
end
return answer
