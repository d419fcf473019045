import type { Queue } from 'bullmq';
import type { EnqueueRequest, Prepared } from '../locks/enqueue-lock.js';
import type { JobDefinition } from '../options/job-definitions.js';
import type { BulkJob } from './guarded-queues.js';
import { newJobId, runtimeOnlyOpts } from './job-ids.js';

/** A bulk entry: with no enqueue lock (plain), readied with its lock, or answered already (the lock is held). */
export type BulkEntry =
  | { kind: 'plain'; entry: BulkJob; bulk: BulkJob; digest?: string }
  | { kind: 'locked'; entry: BulkJob; bulk: BulkJob; definition: JobDefinition; request: EnqueueRequest }
  | { kind: 'held'; entry: BulkJob; definition: JobDefinition; digest: string; existingJobId: string | undefined };

/** A bulk entry being readied: its finish, and the request of its enqueue lock, if it has one. */
interface Started {
  finish: () => Promise<BulkEntry>;
  definition?: JobDefinition;
  request?: EnqueueRequest;
}

/** A bulk entry with its definition and digest (none: a plain job). */
export interface BulkRequest {
  entry: BulkJob;
  definition: JobDefinition | undefined;
  digest: string | undefined;
  /** Someone listens for the `locked` event (see `EnqueueRequest.reported`). */
  reported?: boolean;
}

/** A bulk's entries readied, and how to give back the locks they took (when the bulk's add fails). */
export interface ReadiedBulk {
  entries: BulkEntry[];
  abandon: () => Promise<void>;
}

/**
 * Readies the entries of a bulk (their locks taken, where they are not taken inside BullMQ's add, or met held). Entries
 * start together, their first calls sent in entry order (they share a round trip and, through `writeTogether`, one
 * socket write), and are finished in entry order; an entry that cannot start before the ones before it finished
 * ({@link EnqueueLock.begin}) waits for them. If any fails, every entry started is still finished, what they took is
 * given back, and the first error is thrown.
 */
export async function readyBulk(
  queue: Queue,
  requests: readonly BulkRequest[],
  /** Runs a function that sends commands without awaiting them, the commands leaving in one socket write. */
  writeTogether: <T>(send: () => T) => T,
): Promise<ReadiedBulk> {
  const entries: BulkEntry[] = [];
  /** Requests whose readying failed: one with a job id of the library's may have taken its slot before failing. */
  const failed: { definition: JobDefinition; request: EnqueueRequest }[] = [];
  const abandon = async () => {
    for (const e of entries) if (e.kind === 'locked') await e.definition.enqueueLock!.abandon(e.request);
    for (const f of failed) if (f.request.opts.jobId === undefined) await f.definition.enqueueLock!.abandon(f.request);
  };
  // Producer job ids an earlier entry of this bulk adds: a later entry with one is that job (BullMQ adds it once).
  const adding = new Set<string>();
  let failure: { error: unknown } | undefined;
  for (let next = 0; next < requests.length && !failure;) {
    const started: Started[] = [];
    try {
      next = writeTogether(() => {
        let at = next;
        for (let begun; at < requests.length && (begun = begin(queue, requests[at], adding)); at++) started.push(begun);
        if (started.length === 0) started.push(readyInTurn(queue, requests[at++], adding));
        return at;
      });
    } catch (error) {
      failure = { error }; // a request that could not even be made (its options): the ones started are finished
    }
    // Every entry started is finished, even after one failed: what each took is then known, and given back.
    for (const { finish, definition, request } of started) {
      try {
        const entry = await finish();
        entries.push(entry);
        if (addsItsJobId(entry)) adding.add(entry.entry.opts!.jobId!);
      } catch (error) {
        failure ??= { error };
        if (definition && request) failed.push({ definition, request });
      }
    }
  }
  if (failure) {
    await abandon();
    throw failure.error;
  }
  return { entries, abandon };
}

/** A bulk entry readied in its turn: plain, or with its enqueue lock prepared (taken, or met held). */
function readyInTurn(queue: Queue, request: BulkRequest, adding: ReadonlySet<string>): Started {
  const started = start(queue, request, adding);
  if ('kind' in started) return { finish: () => Promise.resolve(started) };
  const { definition } = request;
  return {
    definition,
    request: started,
    finish: async () => readied(request, started, await definition!.enqueueLock!.prepare(started)),
  };
}

/** A bulk entry begun ({@link EnqueueLock.begin}), or `undefined` when it must wait for its turn. */
function begin(queue: Queue, request: BulkRequest, adding: ReadonlySet<string>): Started | undefined {
  const started = start(queue, request, adding);
  if ('kind' in started) return { finish: () => Promise.resolve(started) };
  const finish = request.definition!.enqueueLock!.begin(started);
  return (
    finish && {
      definition: request.definition,
      request: started,
      finish: async () => readied(request, started, await finish()),
    }
  );
}

/** A plain entry, or the enqueue request of one with an enqueue lock. */
function start(
  queue: Queue,
  { entry, definition, digest, reported }: BulkRequest,
  adding: ReadonlySet<string>,
): BulkEntry | EnqueueRequest {
  const opts = entry.opts ?? {};
  if (!definition || digest === undefined) return { kind: 'plain', entry, bulk: entry };
  if (!definition.enqueueLock) {
    return { kind: 'plain', entry, bulk: { ...entry, opts: runtimeOnlyOpts(definition, opts) }, digest };
  }
  const jobId = opts.jobId ?? newJobId();
  return {
    queue,
    name: entry.name,
    data: entry.data,
    opts,
    digest,
    jobId,
    ...(opts.jobId !== undefined && adding.has(jobId) ? { addedBefore: true } : {}),
    ...(reported ? { reported } : {}),
  };
}

/** A bulk entry with an enqueue lock, readied: to add with the options that carry its lock, or held already. */
function readied({ entry, definition }: BulkRequest, request: EnqueueRequest, prepared: Prepared): BulkEntry {
  return 'opts' in prepared
    ? { kind: 'locked', entry, bulk: { ...entry, opts: prepared.opts }, definition: definition!, request }
    : { kind: 'held', entry, definition: definition!, digest: request.digest, existingJobId: prepared.existingJobId };
}

/**
 * Whether the bulk's add will leave a job with this entry's producer `jobId` (added, or there already): a plain entry or
 * one locked on the slot set. Not one whose add BullMQ may deduplicate (a fast-path entry, or a plain entry with
 * BullMQ's own deduplication option): BullMQ then adds no job with that id.
 */
function addsItsJobId(entry: BulkEntry): boolean {
  return entry.kind !== 'held' && entry.entry.opts?.jobId !== undefined && entry.bulk.opts?.deduplication === undefined;
}
