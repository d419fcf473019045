-- Milliseconds on the Redis server's clock, so leases never depend on the clocks of the clients.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
