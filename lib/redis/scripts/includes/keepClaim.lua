-- Sets the TTL of an in_progress record: its lease plus ten minutes, so that a claim made after a crash (when BullMQ
-- hands the stalled job out again, or its retry comes) still finds the record and is seen as a takeover. Whether the
-- record is live is decided by its 'until' field, not by the TTL.
local function keepClaim(record, lease)
  redis.call('PEXPIRE', record, lease + 600000)
end
