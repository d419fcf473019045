import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Thrown by `deadSet.retry(id)` for an entry that was stored without its payload (its JSON was over
 * `deadSet.maxEntryBytes`): there is no data to enqueue again. The entry stays in the dead set, where it can still be
 * listed and deleted.
 */
export class TruncatedDeadSetEntryError extends UniqueJobsError {
  constructor(
    /** Id of the dead-set entry. */
    readonly entryId: string,
    /** Size in bytes the entry's JSON had with its payload. */
    readonly originalBytes: number | undefined,
    /** sha256 (hex) of the JSON of the payload that was dropped (`{ data, opts }`). */
    readonly payloadSha256: string | undefined,
  ) {
    super(
      `Cannot retry dead-set entry ${entryId}: it was stored without its data and options ` +
        `(${originalBytes ?? 'unknown'} bytes, over deadSet.maxEntryBytes; payload sha256 ${payloadSha256 ?? 'unknown'}). ` +
        'Enqueue the job again from its source, then delete the entry.',
    );
  }
}
