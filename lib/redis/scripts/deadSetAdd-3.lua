--[[
  Adds a rejected duplicate to the dead set and keeps the set bounded by age, entries and bytes: entries older than
  maxAge and the oldest entries beyond maxSize are dropped (at most 100 of each per call, so no call walks the whole
  set), then the oldest entries until the JSON of those left totals at most maxBytes. The byte total is kept in a
  counter (KEYS[3]) that every script removing an entry decrements by the length of the removed value; when it is
  missing (a dead set written before the counter existed, or the counter was deleted) it is counted again from the
  hash. All keys expire maxAge after the last add (by then every entry is too old anyway), so an idle dead set leaves
  nothing behind.

  KEYS[1] index (sorted set: entry id -> time added, ms)
  KEYS[2] entries (hash: entry id -> JSON)
  KEYS[3] byte counter (string: total length in bytes of the values of KEYS[2])
  ARGV[1] entry id
  ARGV[2] entry JSON
  ARGV[3] maxSize
  ARGV[4] maxAge, ms; 0 when the caller does not know it (the CLI putting back an entry whose retry failed): then no
          entry is dropped by age and no key's expiry is shortened (they keep the longest expiry among them, or
          ARGV[6] when none has one)
  ARGV[5] maxBytes
  ARGV[6] expiry when maxAge is 0 and no key has one, ms
  ARGV[7] when the entry is put back (its retry's enqueue failed): the score it had in the index (the time it was
          added, ms, by Redis' clock), so that it keeps its age (dropped by maxAge when it was first due to be, and
          first among the oldest: the bounds may drop it); empty for a new entry. One that is not a finite number, or
          ahead of now (Redis' clock went back), is scored as a new entry

  Returns the number of entries dropped, or -1 when the entry alone is over maxBytes: then it is not stored and
  nothing is dropped (the caller cuts entries to maxEntryBytes, at most maxBytes, before they get here).
]]
--- @include "includes/nowMs"
--- @include "includes/addDeadEntry"
return addDeadEntry(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7])
