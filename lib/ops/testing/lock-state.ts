import type { JobsOptions, Queue } from 'bullmq';
import { DeduplicationEnqueueLock } from '../../locks/deduplication.enqueue-lock.js';
import { bullKeys } from '../../redis/keys.js';
import { parseRuntimeLockOwner } from '../../redis/runtime-lock-owner.js';
import { internalsOf, type UniqueJobsTestTarget } from './testing-target.js';

/** A queue given to the lock helpers: a BullMQ `Queue`, or a queue name of the application. */
export type QueueRef = Pick<Queue, 'name'> | string;

/** Who holds one of a job's locks. */
export interface HeldLockState {
  /** The Redis key of the lock. */
  key: string;
  /** Ids of the jobs holding it (owners whose lease has not ended). */
  holders: string[];
}

/** A job's locks, as {@link lockState} reads them. */
export interface LockState {
  /** The digest the job gets. */
  digest: string;
  /** Its enqueue lock, when its lock type takes one; `holders` is empty when it is free. */
  enqueue?: HeldLockState;
  /** Its run-time lock, when its lock type takes one. */
  runtime?: HeldLockState;
}

/**
 * Reads the locks a job with this name and data would meet (its digest computed as the application computes it), and
 * who holds them. Throws when (queue, name) is not a unique job of the application.
 */
export async function lockState(
  app: UniqueJobsTestTarget,
  queue: QueueRef,
  name: string,
  data: unknown,
  opts?: JobsOptions,
): Promise<LockState> {
  const { client, keys, definitions, prefixOf } = internalsOf(app);
  const queueName = typeof queue === 'string' ? queue : queue.name;
  const definition = definitions.find(queueName, name);
  if (!definition) {
    throw new Error(`Job "${name}" on queue "${queueName}" is not a unique job of this application`);
  }
  const queuePrefix = prefixOf(queue);
  const digest = definition.digestOf({ name, queueName, data, opts, prefix: queuePrefix });
  const state: LockState = { digest };
  const now = Date.now();
  const leased = async (key: string, owners: (member: string) => string = (id) => id): Promise<HeldLockState> => ({
    key,
    holders: (await client.zrangebyscore(key, `(${now}`, '+inf')).map(owners),
  });
  if (definition.enqueueLock) {
    if (definition.enqueueLock instanceof DeduplicationEnqueueLock) {
      const key = bullKeys.deduplication(bullKeys.qualifiedName(queuePrefix, queueName), digest);
      const holder = await client.get(key);
      state.enqueue = { key, holders: holder === null ? [] : [holder] };
    } else {
      state.enqueue = await leased(keys.enqueueLock(digest, definition.options.lock));
    }
  }
  if (definition.lock.locksWhileRunning) {
    state.runtime = await leased(keys.runtimeLock(digest), (owner) => parseRuntimeLockOwner(owner).jobId);
  }
  return state;
}

/** Whether a job with this name and data is locked: its enqueue lock or (with `kind`) one kind of lock is held. */
export async function isLocked(
  app: UniqueJobsTestTarget,
  queue: QueueRef,
  name: string,
  data: unknown,
  options: { kind?: 'enqueue' | 'runtime'; opts?: JobsOptions } = {},
): Promise<boolean> {
  const state = await lockState(app, queue, name, data, options.opts);
  const held = (lock: HeldLockState | undefined) => (lock?.holders.length ?? 0) > 0;
  if (options.kind === 'enqueue') return held(state.enqueue);
  if (options.kind === 'runtime') return held(state.runtime);
  return held(state.enqueue) || held(state.runtime);
}

/**
 * Throws (an `Error` any test runner reports) unless a job with this name and data is locked; resolves the lock state.
 * With `holder`, the lock must be held by that job id.
 */
export async function expectLocked(
  app: UniqueJobsTestTarget,
  queue: QueueRef,
  name: string,
  data: unknown,
  options: { kind?: 'enqueue' | 'runtime'; holder?: string; opts?: JobsOptions } = {},
): Promise<LockState> {
  const state = await lockState(app, queue, name, data, options.opts);
  const locks = [
    options.kind !== 'runtime' ? state.enqueue : undefined,
    options.kind !== 'enqueue' ? state.runtime : undefined,
  ];
  const holders = locks.flatMap((lock) => lock?.holders ?? []);
  const ok = options.holder === undefined ? holders.length > 0 : holders.includes(options.holder);
  if (!ok) {
    throw new Error(
      `Expected ${describe(queue, name, state.digest)} to be ${options.kind ?? ''}${options.kind ? ' ' : ''}locked${
        options.holder === undefined ? '' : ` by job ${options.holder}`
      }, but ${holders.length === 0 ? 'no lock is held' : `it is held by job(s) ${holders.join(', ')}`}`,
    );
  }
  return state;
}

/** Throws unless no lock of a job with this name and data is held (of one `kind`, when given). */
export async function expectNotLocked(
  app: UniqueJobsTestTarget,
  queue: QueueRef,
  name: string,
  data: unknown,
  options: { kind?: 'enqueue' | 'runtime'; opts?: JobsOptions } = {},
): Promise<LockState> {
  const state = await lockState(app, queue, name, data, options.opts);
  const locks = [
    options.kind !== 'runtime' ? state.enqueue : undefined,
    options.kind !== 'enqueue' ? state.runtime : undefined,
  ];
  const held = locks.filter((lock) => (lock?.holders.length ?? 0) > 0);
  if (held.length > 0) {
    throw new Error(
      `Expected ${describe(queue, name, state.digest)} not to be locked, but ${held
        .map((lock) => `${lock!.key} is held by job(s) ${lock!.holders.join(', ')}`)
        .join('; ')}`,
    );
  }
  return state;
}

function describe(queue: QueueRef, name: string, digest: string): string {
  return `job "${name}" on queue "${typeof queue === 'string' ? queue : queue.name}" (digest ${digest})`;
}
