import { digest, usesDeduplicationKey } from '../digest/digest.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import type { ConflictStrategy } from '../interfaces/conflict-strategy.interface.js';
import type {
  LockArgsJob,
  UniqueJobDefaults,
  UniqueJobDefinition,
  UniqueJobOptions,
} from '../interfaces/unique-job-options.interface.js';
import { LOCKS, type Lock } from '../locks/index.js';
import { JobNameRegistry, type JobNameScoped } from './job-name-registry.js';
import { resolveJobOptions, type EffectiveJobOptions } from '../unique-jobs.options.js';

/** The options that apply to (queue, job name), validated, with defaults, the lock, the strategies and the digest. */
export interface ResolvedJobDefinition extends JobNameScoped {
  readonly queue: string;
  readonly options: EffectiveJobOptions;
  readonly lock: Lock;
  /** Strategy for duplicates at enqueue, if the lock has any. */
  readonly clientStrategy: ConflictStrategy | undefined;
  /** Strategy for duplicates in the worker, if the lock has any. */
  readonly serverStrategy: ConflictStrategy | undefined;
  /** Whether the enqueue lock rides on BullMQ's deduplication key (one Redis call) or on the library's own key. */
  readonly enqueueLockPath: 'deduplication' | 'semaphore';
  /** The digest of a job. @throws UnserializableLockArgsError */
  digestOf(job: LockArgsJob): string;
}

/**
 * Which unique-job options apply to (queue, job name): from `@UniqueJob` on processors (registered when the processor
 * is instantiated) and from `forRoot({ jobs })`. One instance per application.
 */
export class JobDefinitions {
  private readonly registry = new JobNameRegistry<ResolvedJobDefinition>('unique job options');

  constructor(
    private readonly defaults: Partial<UniqueJobDefaults> | undefined,
    private readonly strategies: ReadonlyMap<string, ConflictStrategy>,
  ) {}

  /** Registers options declared for a queue. Throws `InvalidUniqueJobOptionsError` (at bootstrap). */
  register(
    queue: string,
    options: UniqueJobOptions | UniqueJobDefinition,
    source: string,
    processorClass?: object,
  ): ResolvedJobDefinition {
    if ('queue' in options && options.queue !== queue) {
      throw new InvalidUniqueJobOptionsError(
        source,
        'queue',
        `is "${options.queue}" but the processor consumes queue "${queue}"`,
      );
    }
    const resolved = resolve(queue, options, source, this.defaults, this.strategies, processorClass);
    return this.registry.add(queue, options, resolved);
  }

  /** The options for a job, or `undefined` when the job is not unique. */
  find(queue: string, name: string): ResolvedJobDefinition | undefined {
    return this.registry.find(queue, name);
  }

  /** Whether any options were registered for the queue. */
  hasQueue(queue: string): boolean {
    return this.registry.hasQueue(queue);
  }
}

function resolve(
  queue: string,
  declared: UniqueJobOptions | UniqueJobDefinition,
  source: string,
  defaults: Partial<UniqueJobDefaults> | undefined,
  strategies: ReadonlyMap<string, ConflictStrategy>,
  processorClass: object | undefined,
): ResolvedJobDefinition {
  const { options, strategies: chosen } = resolveJobOptions(source, declared, defaults, strategies, processorClass);
  const lockArgs = declared.lockArgs;
  const pick: (data: unknown, job: LockArgsJob) => unknown =
    lockArgs === undefined
      ? (data) => data
      : typeof lockArgs === 'string'
        ? (data, job) =>
            (processorClass as Record<string, (d: unknown, j: LockArgsJob) => unknown>)[lockArgs](data, job)
        : lockArgs;
  return {
    queue,
    jobNames: declared.jobName === undefined ? undefined : [declared.jobName].flat(),
    source,
    options,
    lock: LOCKS[options.lock],
    clientStrategy: chosen.client,
    serverStrategy: chosen.server,
    enqueueLockPath: usesDeduplicationKey(options.lock, options.lockLimit, options.uniqueAcross)
      ? 'deduplication'
      : 'semaphore',
    digestOf: (job) =>
      digest({
        queue,
        name: job.name,
        lockArgs: pick(job.data, job),
        uniqueAcross: options.uniqueAcross,
        picked: lockArgs !== undefined,
      }),
  };
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
