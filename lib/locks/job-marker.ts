/**
 * What the library stores on a job's options (field `uniqueJobs`): for a job locked in a slot set, the digest, fixed at
 * enqueue. A job locked by a deduplication key carries its digest in BullMQ's deduplication id, so it needs none
 * (every byte of job options costs enqueue throughput): its field holds `{ lockTtl }` only when a caller's `timestamp`
 * moved its run time, and is absent otherwise.
 */
export interface UniqueJobMarker {
  /** The job's digest (`v1:` + 64 hex digits), as computed at enqueue: a job locked in a slot set. */
  digest?: string;
  /** The `lockTtl` (ms) a job locked by a deduplication key was added with, when a caller's `timestamp` moved it. */
  lockTtl?: number;
}

/** The job options field holding {@link UniqueJobMarker}. */
export const MARKER_FIELD = 'uniqueJobs';

/** The digest a job's marker names, if it has one. */
export function markedDigest(opts: object | undefined): string | undefined {
  const marker = (opts as Record<string, unknown> | undefined)?.[MARKER_FIELD] as UniqueJobMarker | undefined;
  return typeof marker?.digest === 'string' ? marker.digest : undefined;
}

/** The digest a job hash's raw `opts` field names; `undefined` when it is missing, not JSON or has no marker. */
export function markedDigestIn(rawOpts: string | null): string | undefined {
  try {
    return rawOpts === null ? undefined : markedDigest(JSON.parse(rawOpts) as object);
  } catch {
    return undefined;
  }
}
