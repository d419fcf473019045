/** Default bounds of the dead set: 10,000 entries, 7 days, 64 MiB in total, 1 MiB per entry (larger: truncated). */
export const DEFAULT_DEAD_SET = {
  maxSize: 10_000,
  maxAge: 7 * 24 * 60 * 60 * 1000,
  maxBytes: 64 * 1024 * 1024,
  maxEntryBytes: 1024 * 1024,
};
