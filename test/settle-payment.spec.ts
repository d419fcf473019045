/**
 * The seed scenario, written with the public API exactly as the README shows it: SettlePaymentJob for evt_123,
 * re-delivered while its job is still working.
 */
import 'reflect-metadata';
import { afterAll, afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Injectable, Module } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { QueueEvents, type Job, type Queue } from 'bullmq';
import { defineUniqueJob, UniqueJob, UniqueJobsModule, UniqueJobsService } from 'nestjs-unique-jobs';
import { deferred } from './support/deferred.js';
import { deleteNamespaces, lockKeys, openQueueEvents, redisClient, redisOptions, uniqueName } from './support/redis.js';

// ── settle-payment.job.ts (README) ──
interface SettlePaymentData {
  eventId: string;
  payload: { amount: number; currency: string };
}

const QUEUE = uniqueName('payments'); // the README's 'payments', made unique for parallel test files

const SettlePaymentJob = defineUniqueJob<SettlePaymentData>({
  queue: QUEUE,
  jobName: 'settle',
  lock: 'until_executed',
  onConflict: 'reject',
  lockArgs: (data) => [data.eventId],
});

// ── the app's ledger: settle is a no-op on an already-settled payment; the gate holds a settlement mid-job ──
let gate = deferred();
let started = deferred();

@Injectable()
class PaymentsService {
  readonly settled = new Map<string, number>();
  readonly calls: string[] = [];
  async settle(eventId: string) {
    this.calls.push(eventId);
    started.resolve();
    await gate.promise;
    if (!this.settled.has(eventId)) this.settled.set(eventId, Date.now());
    return { eventId };
  }
}

// ── settle-payment.processor.ts (README) ──
@Processor(QUEUE)
@UniqueJob(SettlePaymentJob)
class SettlePaymentProcessor extends WorkerHost {
  constructor(private readonly payments: PaymentsService) {
    super();
  }

  async process(job: Job<SettlePaymentData>) {
    return this.payments.settle(job.data.eventId);
  }
}

// ── webhooks.service.ts (README) ──
@Injectable()
class WebhooksService {
  constructor(
    @InjectQueue(QUEUE) private readonly queue: Queue<SettlePaymentData>,
    private readonly uniqueJobs: UniqueJobsService,
  ) {}

  receive(event: { id: string; data: SettlePaymentData['payload'] }) {
    return this.queue.add('settle', { eventId: event.id, payload: event.data });
  }

  receiveExplicitly(event: { id: string; data: SettlePaymentData['payload'] }) {
    return this.uniqueJobs.enqueue(this.queue, 'settle', { eventId: event.id, payload: event.data });
  }
}

// ── app.module.ts (README) ──
const prefix = uniqueName('settle');

@Module({
  imports: [
    BullModule.forRoot({ connection: redisOptions() }),
    BullModule.registerQueue({ name: QUEUE }),
    UniqueJobsModule.forRoot({ jobs: [SettlePaymentJob], prefix, logger: false }),
  ],
  providers: [PaymentsService, SettlePaymentProcessor, WebhooksService],
})
class AppModule {}

describe('SettlePaymentJob (the README example)', () => {
  const redis = redisClient();
  let moduleRef: TestingModule;
  let events: QueueEvents;

  beforeEach(async () => {
    gate = deferred();
    started = deferred();
    moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    await moduleRef.init();
    events = await openQueueEvents(QUEUE);
    await events.waitUntilReady();
  });

  afterEach(async () => {
    gate.resolve();
    await moduleRef.close();
    await events.close();
  });

  afterAll(async () => {
    // The queue's jobs and the dead set (its keys live 7 days) go with the file: the shared Redis stays clean.
    await deleteNamespaces(redis, { queues: [QUEUE], prefixes: [prefix] });
    await redis.quit();
  });

  it('evt_123 re-delivered 5 times mid-job: 1 job, 5 rejected duplicates; evt_456 independent; a late delivery runs again', async () => {
    const webhooks = moduleRef.get(WebhooksService);
    const uniqueJobs = moduleRef.get(UniqueJobsService);
    const payments = moduleRef.get(PaymentsService);
    const settle = (id: string, amount: number) => ({ id, data: { amount, currency: 'EUR' } });

    const first = await webhooks.receive(settle('evt_123', 4200));
    await started.promise; // the first settlement is in progress

    // Re-deliveries with a jittery payload: plain queue.add answers with a Job handle of the holder's id and the data
    // passed (README: built locally in one round trip, as BullMQ's own deduplication does); the holder keeps its data.
    const again = await Promise.all([1, 2, 3, 4, 5].map((n) => webhooks.receive(settle('evt_123', 4200 + n))));
    expect(again.map((job) => job.id)).toEqual(Array(5).fill(first.id));
    expect(again.map((job) => job.data.payload.amount)).toEqual([4201, 4202, 4203, 4204, 4205]);
    const holder = await moduleRef.get<Queue<SettlePaymentData>>(getQueueToken(QUEUE)).getJob(first.id!);
    expect(holder?.data.payload.amount).toBe(4200);

    // The explicit API says what happened.
    const explicit = await webhooks.receiveExplicitly(settle('evt_123', 9999));
    expect(explicit).toMatchObject({ status: 'duplicate', strategy: 'reject', existingJobId: first.id });

    const other = await webhooks.receiveExplicitly(settle('evt_456', 990));
    expect(other.status).toBe('enqueued');

    const dead = await uniqueJobs.deadSet.list({ limit: 100 });
    expect(dead).toHaveLength(6);
    expect(dead.every((entry) => entry.existingJobId === first.id && entry.side === 'client')).toBe(true);
    expect(dead.map((entry) => (entry.data as SettlePaymentData).payload.amount).sort()).toEqual([
      4201, 4202, 4203, 4204, 4205, 9999,
    ]);

    gate.resolve();
    await first.waitUntilFinished(events);
    if (other.status === 'enqueued') await other.job.waitUntilFinished(events);
    expect(payments.calls.sort()).toEqual(['evt_123', 'evt_456']);
    expect(await lockKeys(redis, prefix, QUEUE)).toEqual([]);

    // After completion the lock is gone: a late re-delivery runs again, and settle() changes nothing.
    const late = await webhooks.receive(settle('evt_123', 4200));
    expect(late.id).not.toBe(first.id);
    await late.waitUntilFinished(events);
    expect(payments.calls.filter((id) => id === 'evt_123')).toHaveLength(2);
    expect(payments.settled.size).toBe(2);
    expect(await lockKeys(redis, prefix, QUEUE)).toEqual([]);
  });
});
