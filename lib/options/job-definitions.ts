import { JobNameRegistry } from '../common/job-name-registry.js';
import type { ConflictStrategy } from '../conflicts/conflict-strategy.interface.js';
import { digest, usesDeduplicationKey } from '../digest/digest.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';
import type {
  LockArgsJob,
  ResolvedJobDefinition,
  UniqueJobDefaults,
  UniqueJobDefinition,
  UniqueJobOptions,
} from '../interfaces/unique-job-options.interface.js';
import { DeduplicationEnqueueLock } from '../locks/deduplication.enqueue-lock.js';
import type { EnqueueLock } from '../locks/enqueue-lock.js';
import { LOCKS, type Lock } from '../locks/index.js';
import type { LockStore } from '../locks/lock-store.js';
import type { LockedBy } from '../locks/locked-digest.js';
import { SlotSetEnqueueLock } from '../locks/slot-set.enqueue-lock.js';
import type { UniqueJobsKeys } from '../redis/keys.js';
import { DEFAULT_ENQUEUE_LEASE } from './defaults.js';
import { resolveJobOptions } from './job-options.js';

/**
 * The options that apply to (queue, job name), validated, with defaults, and what they choose: the lock type, the
 * enqueue lock (chosen once, here), the strategies and the digest.
 */
export interface JobDefinition extends ResolvedJobDefinition {
  readonly lock: Lock;
  /** The enqueue lock, when the lock type takes one: what a new job takes. */
  readonly enqueueLock: EnqueueLock | undefined;
  /**
   * The enqueue lock of a job that exists, by the kind it took at enqueue ({@link lockedAs}): {@link enqueueLock}, or,
   * for a job enqueued before options that move its digest to the other kind (`lockLimit` 1 ↔ more, `uniqueAcross:
   * 'queues'`, `until_expired` ↔ another type), a lock of the kind it took, so that the job releases (or takes back)
   * what it holds, not a lock it never held; for a lock type that takes none (`while_executing`), the lock such a job
   * took, released at its end.
   */
  enqueueLockOf(kind: LockedBy): EnqueueLock | undefined;
  /** Strategy for duplicates at enqueue, if the lock has any. */
  readonly clientStrategy: ConflictStrategy | undefined;
  /**
   * Strategy for duplicates met in the worker: the run-time lock's, or, for a lock taken at enqueue only, the one a job
   * meets when it starts again without its lock and another job holds it (the client strategy's worker side, else
   * `reject`).
   */
  readonly serverStrategy: ConflictStrategy | undefined;
  /** The digest of a job. @throws UnserializableLockArgsError */
  digestOf(job: LockArgsJob): string;
}

/** Where enqueue locks live: what a definition needs to build its own. */
export interface EnqueueLockStores {
  readonly store: LockStore;
  readonly keys: UniqueJobsKeys;
}

/**
 * Which unique-job options apply to (queue, job name): from `@UniqueJob` on processors (registered when the processor
 * is instantiated) and from `forRoot({ jobs })`. One instance per application.
 */
export class JobDefinitions {
  private readonly registry = new JobNameRegistry<JobDefinition>('unique job options');
  /** Every definition registered, to find those whose digests meet (unique across queues or names). */
  private readonly all: JobDefinition[] = [];

  constructor(
    private readonly defaults: Partial<UniqueJobDefaults> | undefined,
    private readonly strategies: ReadonlyMap<string, ConflictStrategy>,
    private readonly stores: EnqueueLockStores,
  ) {}

  /** Registers options declared for a queue. Throws `InvalidUniqueJobOptionsError` (at bootstrap). */
  register(
    queue: string,
    options: UniqueJobOptions | UniqueJobDefinition,
    source: string,
    processorClass?: object,
  ): JobDefinition {
    if (typeof options === 'object' && options !== null && 'queue' in options && options.queue !== queue) {
      throw new InvalidUniqueJobOptionsError(
        source,
        'queue',
        `is "${options.queue}" but the processor consumes queue "${queue}"`,
      );
    }
    const resolved = this.registry.add(queue, options, this.resolve(queue, options, source, processorClass));
    this.checkSharedDigests(resolved);
    if (!this.all.includes(resolved)) this.all.push(resolved);
    return resolved;
  }

  /**
   * Definitions whose digests can be equal (the queue or the job name left out of the digest, `uniqueAcross`) share one
   * lock: they must describe it alike, or a job of one and a job of the other would be judged by two different locks.
   */
  private checkSharedDigests(definition: JobDefinition): void {
    for (const other of this.all) {
      if (other === definition || !digestsMeet(definition, other)) continue;
      const differs = (['lock', 'lockLimit', 'lockTtl', 'runtimeLockLease'] as const).find(
        (option) => definition.options[option] !== other.options[option],
      );
      if (differs === undefined) continue;
      throw new InvalidUniqueJobOptionsError(
        definition.source,
        differs,
        `differs from ${other.source}, whose digests can be the same (uniqueAcross: ${[...new Set([...definition.options.uniqueAcross, ...other.options.uniqueAcross])].join(', ')}): jobs that share a digest share one lock, so give both the same lock, lockLimit, lockTtl and runtimeLockLease`,
      );
    }
  }

  /** The options for a job, or `undefined` when the job is not unique. */
  find(queue: string, name: string): JobDefinition | undefined {
    return this.registry.find(queue, name);
  }

  /** Whether a job of the queue removed by hand may leave a hold for the library to give back (see `holdOf`). */
  releasesOnRemoval(queue: string): boolean {
    return this.registry.entries(queue).some((definition) => definition.enqueueLock?.releasesOnRemoval === true);
  }

  /** The job names the queue's definitions name (a definition without `jobName` covers every name: none then). */
  jobNamesOf(queue: string): string[] {
    return [...new Set(this.registry.entries(queue).flatMap((definition) => definition.jobNames ?? []))];
  }

  /** Whether any options were registered for the queue. */
  hasQueue(queue: string): boolean {
    return this.registry.hasQueue(queue);
  }

  private resolve(
    queue: string,
    declared: UniqueJobOptions | UniqueJobDefinition,
    source: string,
    processorClass: object | undefined,
  ): JobDefinition {
    const resolved = resolveJobOptions(source, declared, this.defaults, this.strategies, processorClass);
    const { options } = resolved;
    const lock = LOCKS[options.lock];
    const lockArgs = declared.lockArgs;
    const pick: (data: unknown, job: LockArgsJob) => unknown =
      lockArgs === undefined
        ? (data) => data
        : typeof lockArgs === 'string'
          ? (data, job) =>
              (processorClass as Record<string, (d: unknown, j: LockArgsJob) => unknown>)[lockArgs](data, job)
          : lockArgs;
    const { client, server } = resolved.strategies;
    const enqueueLock = lock.locksAtEnqueue ? this.enqueueLockFor(options, lock) : undefined;
    const ofKind: Partial<Record<LockedBy, EnqueueLock>> = {};
    return {
      queue,
      jobNames: declared.jobName === undefined ? undefined : [declared.jobName].flat(),
      source,
      options,
      lock,
      enqueueLock,
      enqueueLockOf: (kind) => {
        if (enqueueLock && (kind === 'deduplication') === enqueueLock instanceof DeduplicationEnqueueLock) {
          return enqueueLock;
        }
        return (ofKind[kind] ??= this.lockOfKind(options, lock, kind));
      },
      clientStrategy: client,
      serverStrategy: server ?? (client?.onServerConflict ? client : this.strategies.get('reject')),
      digestOf: (job) => {
        try {
          return digest({
            queue,
            queuePrefix: job.prefix,
            name: job.name,
            lockArgs: pick(job.data, job),
            uniqueAcross: options.uniqueAcross,
            picked: lockArgs !== undefined,
          });
        } catch (error) {
          throw error instanceof UnserializableLockArgsError
            ? error.of({ queue: job.queueName, name: job.name })
            : error;
        }
      },
    };
  }

  private enqueueLockFor(options: JobDefinition['options'], lock: Lock): EnqueueLock {
    if (usesDeduplicationKey(options.lock, options.lockLimit, options.uniqueAcross)) {
      return new DeduplicationEnqueueLock(this.stores.store, options.lockTtl);
    }
    return this.slotSet(options, lock);
  }

  /**
   * An enqueue lock of the kind a job took under earlier options, when the definition takes the other kind or none
   * (`while_executing`): its `lockTtl` and `lockLimit` are the definition's. A slot set is the `:queued` one (an
   * `until_expired` period taken before is left to its TTL, as it would be anyway).
   */
  private lockOfKind(options: JobDefinition['options'], lock: Lock, kind: LockedBy): EnqueueLock {
    return kind === 'deduplication'
      ? new DeduplicationEnqueueLock(this.stores.store, options.lockTtl)
      : this.slotSet(options, lock);
  }

  private slotSet(options: JobDefinition['options'], lock: Lock): EnqueueLock {
    const { store, keys } = this.stores;
    return new SlotSetEnqueueLock(store, keys, {
      lock: options.lock,
      lockTtl: options.lockTtl,
      lockLimit: options.lockLimit,
      defaultLease: DEFAULT_ENQUEUE_LEASE,
      outlivesJob: lock.outlivesJob || options.uniqueAcross.includes('queues'),
    });
  }
}

/** Whether two definitions can give two jobs the same digest (one lock for both). */
function digestsMeet(a: JobDefinition, b: JobDefinition): boolean {
  const acrossQueues = a.options.uniqueAcross.includes('queues');
  const acrossNames = a.options.uniqueAcross.includes('names');
  if (acrossQueues !== b.options.uniqueAcross.includes('queues')) return false;
  if (acrossNames !== b.options.uniqueAcross.includes('names')) return false;
  if (!acrossQueues && a.queue !== b.queue) return false;
  if (acrossNames) return true;
  // The name is in the digest: two definitions meet on a name both apply to (every name, for one without jobName).
  if (a.jobNames === undefined || b.jobNames === undefined) return a.queue !== b.queue;
  return a.jobNames.some((name) => b.jobNames!.includes(name));
}

/**
 * Declares unique-job options bound to a queue, to share between producers (`UniqueJobsModule.forRoot({ jobs })`) and
 * the processor (`@UniqueJob(definition)`). Use a function for `lockArgs`: a producer that does not load the processor
 * class cannot call its static methods.
 */
export function defineUniqueJob<DataType = unknown>(
  definition: UniqueJobDefinition<DataType>,
): UniqueJobDefinition<DataType> {
  return Object.freeze({ ...definition });
}
