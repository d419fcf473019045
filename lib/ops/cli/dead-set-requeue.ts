import { Queue } from 'bullmq';
import { strategyRegistry } from '../../conflicts/index.js';
import type { DeadSetRequeue } from '../../dead-set/dead-set.service.js';
import type { DeadSetEntry } from '../../dead-set/dead-set-entry.interface.js';
import { UniqueJobsEvents } from '../../events/unique-jobs.events.js';
import { IdempotencyDefinitions } from '../../idempotency/idempotency-definitions.js';
import { IdempotencyRunner } from '../../idempotency/idempotency.runner.js';
import { RedisIdempotencyStore } from '../../idempotency/stores/redis-idempotency.store.js';
import { isLockDigest } from '../inspection/digest-format.js';
import { JobDefinitions, type EnqueueLockStores, type JobDefinition } from '../../options/job-definitions.js';
import { JobInterceptor } from '../../nest/job.interceptor.js';
import { loggerOf } from '../../common/logger.js';
import type { EnqueueResult } from '../../interfaces/enqueue-result.interface.js';
import type { UniqueJobDefinition } from '../../interfaces/unique-job-options.interface.js';
import { LockStore } from '../../locks/lock-store.js';
import { UniqueJobsKeys } from '../../redis/keys.js';
import { RedisScripts } from '../../redis/redis-scripts.js';
import { integerOption, lockOption, uniqueAcrossOption } from './args.js';
import type { CliContext } from './cli-context.js';
import { CliError } from './errors/cli.error.js';

/** What a CLI retry came to. */
export type RetryOutcome =
  | { status: 'enqueued'; jobId: string | undefined }
  | { status: 'duplicate'; existingJobId: string | undefined }
  | { status: 'gone' };

/** The requeue function of a CLI retry and the runner that turns the retry into a {@link RetryOutcome}. */
export interface CliRequeue {
  requeue: DeadSetRequeue;
  run(retry: () => Promise<EnqueueResult | undefined>): Promise<RetryOutcome>;
}

/** The lock is still held: thrown by the requeue so that the dead set puts the entry back. */
class StillHeld extends Error {
  constructor(readonly existingJobId: string | undefined) {
    super('the lock is still held');
  }
}

/**
 * Definitions that give a job the digest the application computed when it rejected the entry: the CLI cannot run the
 * application's `lockArgs`, and the entry's digest is the one its lock lives under.
 */
class FixedDigestDefinitions extends JobDefinitions {
  constructor(
    private readonly digest: string,
    stores: EnqueueLockStores,
  ) {
    super(undefined, strategyRegistry(), stores);
  }

  override find(queue: string, name: string): JobDefinition | undefined {
    const found = super.find(queue, name);
    return found && { ...found, digestOf: () => this.digest };
  }
}

/**
 * Re-enqueues a dead-set entry from the CLI through the library's own enqueue path (the interceptor), under the
 * entry's digest and the lock the command line describes (`--lock`, `--lock-limit`, `--lock-ttl`,
 * `--unique-across`; default `until_executed`, limit 1: the BullMQ deduplication key). The conflict strategy is `log`:
 * a duplicate enqueues nothing, and the requeue throws so that the dead set keeps the entry.
 */
export async function deadSetRequeue(context: CliContext, entry: DeadSetEntry): Promise<CliRequeue> {
  const { values } = context.args;
  if (!isLockDigest(entry.digest)) {
    throw new CliError(`Dead-set entry ${entry.id} has no valid digest; delete it instead`);
  }
  if (entry.bullPrefix === '' && context.bullPrefix !== '') {
    throw new CliError(
      `Entry ${entry.id} was rejected in queue ${JSON.stringify(entry.queue)} under an empty BullMQ prefix, which ` +
        `--bull-prefix cannot name: retry it from the application (uniqueJobs.deadSet.retry) or the admin page`,
    );
  }
  if (entry.bullPrefix !== undefined && entry.bullPrefix !== context.bullPrefix) {
    throw new CliError(
      `Entry ${entry.id} was rejected in queue ${JSON.stringify(entry.queue)} under the BullMQ prefix ` +
        `${JSON.stringify(entry.bullPrefix)}, not ${JSON.stringify(context.bullPrefix)} (use --bull-prefix)`,
    );
  }
  const queues = await context.queues();
  const found = queues.find((queue) => queue.name === entry.queue);
  if (!found) {
    throw await context.queueNotFound(
      entry.queue,
      `Queue ${JSON.stringify(entry.queue)} of entry ${entry.id} is not under the BullMQ prefix "${context.bullPrefix}" (use --bull-prefix)`,
    );
  }
  const lockTtl =
    values['lock-ttl'] === undefined ? undefined : integerOption('lock-ttl', values['lock-ttl'], 0, 1, 2 ** 31);
  const definition: UniqueJobDefinition = {
    queue: entry.queue,
    jobName: entry.jobName,
    lock: lockOption(values.lock),
    lockLimit: integerOption('lock-limit', values['lock-limit'], 1, 1, 1_000_000),
    uniqueAcross: uniqueAcrossOption(values['unique-across']),
    onConflict: 'log',
    ...(lockTtl === undefined ? {} : { lockTtl }),
  };
  const client = await context.redis();
  const scripts = new RedisScripts(client);
  const store = new LockStore(scripts);
  const keys = new UniqueJobsKeys(context.prefix);
  const definitions = new FixedDigestDefinitions(entry.digest, { store, keys });
  definitions.register(
    entry.queue,
    definition,
    'unique-jobs dead retry (--lock, --lock-limit, --lock-ttl, --unique-across)',
  );

  const events = new UniqueJobsEvents();
  const logger = loggerOf(false);
  const interceptor = new JobInterceptor({
    definitions,
    idempotencyDefinitions: new IdempotencyDefinitions(undefined, {
      default: new RedisIdempotencyStore({ client, prefix: context.prefix }),
      named: new Map(),
    }),
    idempotency: new IdempotencyRunner({ events, logger }),
    strategies: strategyRegistry(),
    client,
    scripts,
    store,
    keys,
    events,
    logger,
    enabled: true,
  });
  const queue = new Queue(found.name, { connection: client, prefix: found.prefix });
  context.onClose(() => queue.close());

  return {
    requeue: async (dead) => {
      const { result } = await interceptor.enqueue(queue, dead.jobName, dead.data, dead.opts);
      if (result.status === 'duplicate') throw new StillHeld(result.existingJobId);
      return result;
    },
    run: async (retry) => {
      try {
        const result = await retry();
        if (!result) return { status: 'gone' };
        return { status: 'enqueued', jobId: result.status === 'enqueued' ? result.job.id : undefined };
      } catch (error) {
        if (error instanceof StillHeld) return { status: 'duplicate', existingJobId: error.existingJobId };
        throw error;
      }
    },
  };
}
