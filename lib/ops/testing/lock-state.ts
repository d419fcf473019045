import type { JobsOptions, Queue } from 'bullmq';
import { DeduplicationEnqueueLock } from '../../locks/deduplication.enqueue-lock.js';
import { markedDigestIn } from '../../locks/job-marker.js';
import { QueueRegistry } from '../../redis/queue-registry.js';
import { bullKeys } from '../../redis/keys.js';
import { ownerNamesQueue, parseRuntimeLockOwner } from '../../redis/runtime-lock-owner.js';
import { internalsOf, type UniqueJobsTestTarget } from './testing-target.js';

/** A queue given to the lock helpers: a BullMQ `Queue`, or a queue name of the application. */
export type QueueRef = Pick<Queue, 'name'> | string;

/** Who holds one of a job's locks. */
export interface HeldLockState {
  /** The Redis key of the lock. */
  key: string;
  /** Ids of the jobs holding it (owners whose lease has not ended). */
  holders: string[];
  /**
   * A lock shared across queues only, when one of its holders is a job of another queue; in the order of `holders`: for
   * a holder that is a job of another queue (its id may be the same as one of this queue's jobs), that queue (its
   * qualified name, or the tag a run-time lock's owner names it by: `#` and 12 hex digits); `undefined` for a job of
   * the queue asked about (or a run-time owner written by an earlier build, which names no queue; or an enqueue lock's
   * holder whose job is found in no queue the application or the library's queue registry knows).
   */
  holderQueues?: (string | undefined)[];
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
  const internals = internalsOf(app);
  const { client, keys, definitions, prefixOf } = internals;
  const queueName = typeof queue === 'string' ? queue : queue.name;
  const definition = definitions.find(queueName, name);
  if (!definition) {
    throw new Error(`Job "${name}" on queue "${queueName}" is not a unique job of this application`);
  }
  const queuePrefix = prefixOf(queue);
  const qualifiedName = bullKeys.qualifiedName(queuePrefix, queueName);
  const digest = definition.digestOf({ name, queueName, data, opts, prefix: queuePrefix });
  const state: LockState = { digest };
  const now = Date.now();
  const leased = async (key: string): Promise<string[]> => client.zrangebyscore(key, `(${now}`, '+inf');
  if (definition.enqueueLock) {
    if (definition.enqueueLock instanceof DeduplicationEnqueueLock) {
      const key = bullKeys.deduplication(qualifiedName, digest);
      const holder = await client.get(key);
      state.enqueue = { key, holders: holder === null ? [] : [holder] };
    } else {
      const key = keys.enqueueLock(digest, definition.options.lock);
      const holders = await leased(key);
      // A lock shared across queues names its holders by id alone: a holder is told by the queue its job is locked in.
      const holderQueues = definition.options.uniqueAcross.includes('queues')
        ? await enqueueHolderQueues(internals, qualifiedName, digest, holders)
        : undefined;
      state.enqueue = { key, holders, ...(holderQueues ? { holderQueues } : {}) };
    }
  }
  if (definition.lock.locksWhileRunning) {
    const key = keys.runtimeLock(digest);
    const owners = (await leased(key)).map(parseRuntimeLockOwner);
    // Named by what the owner carries: a tag is told apart from this queue's alone (another queue is unknown here).
    const holderQueues = owners.map((owner) =>
      ownerNamesQueue(owner, qualifiedName) === false ? (owner.queue ?? owner.queueTag) : undefined,
    );
    state.runtime = {
      key,
      holders: owners.map((owner) => owner.jobId),
      ...(holderQueues.some((queue) => queue !== undefined) ? { holderQueues } : {}),
    };
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
 * For an enqueue lock shared across queues (a slot set, whose members are job ids whatever their queue): the queue of
 * each holder that is not a job of `qualifiedName` locked under `digest` but one of another queue the application or
 * the library's queue registry knows (its qualified name); `undefined` for the others, and when every holder is such a
 * job of `qualifiedName` or found nowhere (its job gone).
 */
async function enqueueHolderQueues(
  { client, keys, queues }: ReturnType<typeof internalsOf>,
  qualifiedName: string,
  digest: string,
  holders: readonly string[],
): Promise<(string | undefined)[] | undefined> {
  const lockedIn = async (name: string, id: string) =>
    markedDigestIn(await client.hget(bullKeys.job(name, id), 'opts')) === digest;
  const here = await Promise.all(holders.map((id) => lockedIn(qualifiedName, id)));
  if (here.every(Boolean)) return undefined;
  const known = queues.map((queue) => bullKeys.qualifiedName(queue.prefix, queue.name));
  const others = [...new Set([...known, ...(await QueueRegistry.read(client, keys).catch(() => []))])].filter(
    (name) => name !== qualifiedName,
  );
  const found = await Promise.all(
    holders.map(async (id, i) => {
      if (here[i]) return undefined;
      for (const name of others) if (await lockedIn(name, id)) return name;
      return undefined;
    }),
  );
  return found.some((queue) => queue !== undefined) ? found : undefined;
}

/**
 * Throws (an `Error` any test runner reports) unless a job with this name and data is locked; resolves the lock state.
 * With `holder`, the lock must be held by that job id, a job of `queue` (a lock shared across queues held by another
 * queue's job with that id does not count).
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
  const holders = locks.flatMap((lock) =>
    (lock?.holders ?? []).map((id, i) => ({ id, elsewhere: lock?.holderQueues?.[i] })),
  );
  // A holder given is a job of the queue asked about: a job of another queue with that id does not hold it for it.
  const ok =
    options.holder === undefined
      ? holders.length > 0
      : holders.some(({ id, elsewhere }) => id === options.holder && elsewhere === undefined);
  if (!ok) {
    const named = holders.map(({ id, elsewhere }) => (elsewhere === undefined ? id : `${id} (of queue ${elsewhere})`));
    throw new Error(
      `Expected ${describe(queue, name, state.digest)} to be ${options.kind ?? ''}${options.kind ? ' ' : ''}locked${
        options.holder === undefined ? '' : ` by job ${options.holder}`
      }, but ${holders.length === 0 ? 'no lock is held' : `it is held by job(s) ${named.join(', ')}`}`,
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
