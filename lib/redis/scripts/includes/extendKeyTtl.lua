-- Makes the key live at least `ms` more (it never shortens a longer TTL held for another owner).
local function extendKeyTtl(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
