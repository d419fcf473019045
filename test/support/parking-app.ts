// The apps of the parked-record suites (a step job's idempotency record handed over between its steps, and what
// settles it when the job will not come back): their handler and options.
import { Queue, Worker, type Job } from 'bullmq';
import type { TestApp, TestAppOptions } from './app.js';
import { EventLog } from './events.js';
import { bullOptions } from './redis.js';
import { stepHandler, type StepData } from './step-handler.js';
import { byKey, type StepStore } from './step-stores.js';

/** An hour: a step job parks that long between its steps, so only what the test does moves it. */
export const HOUR_MS = 60 * 60 * 1000;

/**
 * The handler of a parking app: a job whose data has `steps` runs BullMQ's step pattern (`stepHandler`), moving its job
 * `delayMs` ahead between its steps (`next`: its later step); any other pushes `<job id>:fresh` to `ran`
 * (`<queue>:<job id>:fresh` with `queueInRun`) and resolves `'fresh'`.
 */
export function parkingHandler(
  ran: string[],
  options: { delayMs?: number; next?: (job: Job<StepData>) => Promise<unknown>; queueInRun?: boolean } = {},
): (job: Job<StepData & { steps?: boolean }>) => Promise<unknown> {
  const steps = stepHandler(ran, {
    delayMs: options.delayMs ?? HOUR_MS,
    ...(options.next ? { next: options.next } : {}),
  });
  return async (job) => {
    if (job.data.steps) return steps(job);
    ran.push(options.queueInRun ? `${job.queueName}:${job.id}:fresh` : `${job.id}:fresh`);
    return 'fresh';
  };
}

/**
 * The options of a parking app on `sql` (else the Redis store): its reaper off (only a claim frees a record), a lease
 * of 200 ms, payloads not compared (the duplicates are plain jobs of a step job's key), and a {@link parkingHandler};
 * `idempotency` and `module` add to them.
 */
export function parkingOptions(
  sql: StepStore | undefined,
  ran: string[],
  more: { idempotency?: object; module?: object; handler?: Parameters<typeof parkingHandler>[1] } = {},
): Partial<TestAppOptions> {
  return {
    module: {
      reaper: { interval: false },
      ...(sql ? { idempotency: { stores: { sql: sql.store } } } : {}),
      ...more.module,
    },
    idempotency: { key: byKey, lease: 200, fingerprint: false, ...(sql ? { store: 'sql' } : {}), ...more.idempotency },
    handler: parkingHandler(ran, more.handler),
  };
}

/**
 * Adds a step job of idempotency key `key` to `app`, waits until its record is handed over to its next delivery (parked
 * between its steps), then removes the job with a plain BullMQ client, without the library. Resolves its id.
 */
export async function parkThenRemove(app: TestApp, key: string): Promise<string> {
  const events = new EventLog(app);
  const job = await app.queue.add('charge', { key, steps: true });
  await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === job.id);
  events.stop();
  const plain = new Queue(app.queue.name, bullOptions());
  try {
    await (await plain.getJob(job.id!))!.remove();
  } finally {
    await plain.close();
  }
  return job.id!;
}

/**
 * Hands the parked step job `jobId` of `app` to a plain BullMQ worker, without the library: the app's worker paused, the
 * job promoted. Resolves that worker (`autorun: false`: take the job with `getNextJob`); close it after the test.
 */
export async function parkedJobElsewhere(app: TestApp, jobId: string): Promise<Worker> {
  await app.worker!.pause();
  const plain = new Queue(app.queue.name, bullOptions());
  try {
    await (await plain.getJob(jobId))!.promote();
  } finally {
    await plain.close();
  }
  return new Worker(app.queue.name, null, { ...bullOptions(), autorun: false });
}
