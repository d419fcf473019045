import { randomBytes } from 'node:crypto';
import type { JobsOptions } from 'bullmq';
import type { JobDefinition } from '../options/job-definitions.js';

/**
 * Job ids the library chooses for unique jobs (which need an id of their own: a duplicate is recognised when BullMQ
 * answers with another job's id). A random tag per process (72 bits) followed by a counter in base 36: unique within
 * the process by the counter, across processes by the tag, and about half the length of a UUID, which every key and
 * event of the job carries (a UUID measured ~7% slower per enqueue at 32 in flight). The leading letter keeps ids from
 * ever looking like BullMQ's integer ids.
 */
const TAG = `u${randomBytes(9).toString('base64url')}`;
let counter = 0;

/** A new job id, never returned before by any process (with overwhelming probability across processes). */
export function newJobId(): string {
  counter += 1;
  return `${TAG}${counter.toString(36)}`;
}

/**
 * A job's options as BullMQ reads them: no options (`undefined`, or `null` from JavaScript callers) are none, and an
 * empty or `null` `jobId` is no id (BullMQ numbers such a job itself, as if none was given), so the library must not
 * take it for the caller's id.
 */
export function asBullMQReads(opts: JobsOptions | null | undefined): JobsOptions {
  if (!opts) return {};
  if (opts.jobId !== '' && opts.jobId !== null) return opts;
  const { jobId: _none, ...rest } = opts;
  return rest;
}

/**
 * Options of a job with a run-time lock only (its digest is computed again in the worker, from the same data). The
 * lock's owner is the job id: unique across queues, the id must not repeat on another queue, as BullMQ's counter ids
 * ("1", "2", …) do, so such a job gets an id of the library's unless the caller chose one. No deduplication: its
 * run-time lock decides, not a queue's `defaultJobOptions.deduplication` (BullMQ merges it into every add).
 */
export function runtimeOnlyOpts(definition: JobDefinition, opts: JobsOptions): JobsOptions {
  const acrossQueues = definition.options.uniqueAcross.includes('queues') && opts.jobId === undefined;
  return { ...opts, deduplication: undefined, ...(acrossQueues ? { jobId: newJobId() } : {}) };
}
