import type { JobsOptions } from 'bullmq';

/** The lock types, with the semantics of sidekiq-unique-jobs 8.1 (see docs/how-locks-move.md). */
export type LockType =
  'until_executing' | 'until_executed' | 'until_expired' | 'while_executing' | 'until_and_while_executing';

/** Names of the built-in conflict strategies. */
export type BuiltInStrategyName = 'log' | 'raise' | 'reject' | 'replace' | 'reschedule';

/** A built-in strategy name or the name of a custom strategy registered in `UniqueJobsModule.forRoot({ strategies })`. */
export type StrategyName = BuiltInStrategyName | (string & {});

/**
 * What happens to a duplicate. One name applies to every side the lock has; an object sets the enqueue side
 * (`client`) and the run-time side (`server`) separately.
 */
export type OnConflict =
  | StrategyName
  | {
      /** The strategy at enqueue (enqueue locks). Default: the lock type's. */
      client?: StrategyName;
      /** The strategy in the worker (run-time locks). Default: the lock type's. */
      server?: StrategyName;
    };

/** `client`: at enqueue, before the job exists. `server`: in the worker, when a run-time lock is taken. */
export type ConflictSide = 'client' | 'server';

/** What a uniqueness digest can be made unique across. */
export type UniqueAcross = 'queues' | 'names';

/**
 * The job as `lockArgs` sees it. At enqueue there is no BullMQ job yet, so this carries what the producer passed; in a
 * worker it is the real job (which has these fields too).
 */
export interface LockArgsJob<DataType = unknown> {
  /** The job's name. */
  readonly name: string;
  /** Name of the job's queue. */
  readonly queueName: string;
  /** The job's data. */
  readonly data: DataType;
  /** The BullMQ options the producer passed (at enqueue) or the job's options (in a worker). */
  readonly opts?: JobsOptions;
  /** BullMQ's key prefix of the queue (absent: `'bull'`). A prefix other than `'bull'` is part of the digest. */
  readonly prefix?: string;
}

/**
 * Picks the part of the job that decides uniqueness. The result is hashed as canonical JSON. (Declared as a method so
 * a definition typed for your data fits wherever options for unknown data are expected.)
 */
export type LockArgsFunction<DataType = unknown> = {
  pick(data: DataType, job: LockArgsJob<DataType>): unknown;
}['pick'];

/** Per-job options with a module-wide default (`UniqueJobsModule.forRoot({ defaults })`). */
export interface UniqueJobDefaults {
  /** What happens to a duplicate. Default `'log'`. */
  onConflict: OnConflict;
  /**
   * Milliseconds the enqueue lock lives, counted from the job's run time (enqueue time plus `delay`; a delayed job
   * given a `timestamp` of its own: that timestamp plus `delay`, as BullMQ schedules it). Required for `until_expired`.
   * For the other enqueue locks the default is no TTL: the lock lives exactly as long as its job exists (BullMQ drops a
   * lock whose job is gone on the next enqueue of that digest).
   */
  lockTtl: number | undefined;
  /** Milliseconds a run-time lock conflict waits for the holder before the strategy applies. Default `0`. */
  lockTimeout: number;
  /** How many holders a lock admits (N queued jobs, or N concurrent runs). Default `1`. */
  lockLimit: number;
  /**
   * Lease of a run-time lock in ms, renewed every third of it while the handler runs. Default `30000`. Between two
   * steps of a step job the lock is parked for a day past the job's run time instead (this lease when longer).
   */
  runtimeLockLease: number;
  /** `reschedule`: how far back into delayed a conflicting job is moved, in ms. Default `5000`. */
  rescheduleIn: number;
  /** `reschedule`: how many times one job may be rescheduled before the `reject` fallback applies. Default `10`. */
  maxReschedules: number;
}

/** Options of `@UniqueJob` and of a job definition. */
export interface UniqueJobOptions<DataType = unknown> extends Partial<UniqueJobDefaults> {
  /** The lock type. */
  lock: LockType;
  /**
   * Job names these options apply to. Absent: every job name of the queue that has no options of its own.
   * Put one `@UniqueJob` per name (or list several names) to give names on one queue different options.
   */
  jobName?: string | readonly string[];
  /**
   * What decides uniqueness: a function of the job data, the name of a static method of the processor class (called
   * with the same arguments), or absent for the whole of `data`.
   */
  lockArgs?: LockArgsFunction<DataType> | string;
  /** Leave the queue name or the job name out of the digest, so the lock spans queues or job names. */
  uniqueAcross?: UniqueAcross | readonly UniqueAcross[];
}

/**
 * Options bound to a queue, shareable between a producer that never loads the processor class and the processor
 * itself. Create one with {@link defineUniqueJob}.
 */
export interface UniqueJobDefinition<DataType = unknown> extends UniqueJobOptions<DataType> {
  /** The queue the options apply to. */
  queue: string;
}

/** Per-job options with every default applied and `uniqueAcross` normalized. */
export interface EffectiveJobOptions extends UniqueJobDefaults {
  /**
   * Each side's strategy as resolved, the lock type's defaults applied: one name when every side the lock has uses it,
   * else `{ client, server }` (e.g. `until_and_while_executing` left unset: `{ client: 'log', server: 'reschedule' }`).
   */
  onConflict: OnConflict;
  /** The lock type. */
  lock: LockType;
  /** What the digest leaves out (`[]`: it is unique per queue and job name), as a list even when one was given. */
  uniqueAcross: readonly UniqueAcross[];
}

/** The options in force for (queue, job name), as conflict strategies and events see them. */
export interface ResolvedJobDefinition {
  /** The queue the options apply to. */
  readonly queue: string;
  /** Job names they apply to; `undefined`: every name of the queue without options of its own. */
  readonly jobNames: readonly string[] | undefined;
  /** Where they were declared (for messages), e.g. `SettlePaymentProcessor (@UniqueJob #1)`. */
  readonly source: string;
  /** Every option, defaults applied. */
  readonly options: EffectiveJobOptions;
}
