// The testing helpers used the way an application's own test suite would: a small orders app (a module with a
// processor and a producer service), uniqueness on against a test Redis, `nestjs-unique-jobs/testing` to reset the
// locks between tests, assert that a job is locked or was deduplicated, and wait for lock events.
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Injectable, Module } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Queue, type Job } from 'bullmq';
import { UniqueJob, UniqueJobsModule, UniqueJobsService } from 'nestjs-unique-jobs';
import {
  UniqueJobsTesting,
  expectLocked,
  expectNotLocked,
  isLocked,
  resetLocks,
  waitForUniqueJobEvent,
  wasDeduplicated,
} from 'nestjs-unique-jobs/testing';
import { deleteKeys, redisClient, redisOptions, scanKeys, uniqueName } from '../support/redis.js';

interface Order {
  orderId: string;
}

// What the application under test looks like (queue name made unique for this run only).
const ORDERS = uniqueName('orders');
const PREFIX = uniqueName('orders-app');
const releases = new Map<string, () => void>();
/** Orders whose processing waits until the test lets them go. */
const held = (orderId: string) => new Promise<void>((resolve) => releases.set(orderId, resolve));

@Processor(ORDERS)
@UniqueJob<Order>({ lock: 'until_executed', jobName: 'confirm', lockArgs: (order) => order.orderId })
@UniqueJob<Order>({ lock: 'while_executing', jobName: 'ship', lockArgs: (order) => order.orderId })
class OrdersProcessor extends WorkerHost {
  readonly pending = new Map<string, Promise<void>>();

  async process(job: Job<Order>): Promise<string> {
    await this.pending.get(job.data.orderId);
    return `${job.name}:${job.data.orderId}`;
  }
}

@Injectable()
class OrdersService {
  constructor(
    @InjectQueue(ORDERS) readonly queue: Queue<Order>,
    private readonly uniqueJobs: UniqueJobsService,
  ) {}

  confirm(orderId: string) {
    return this.uniqueJobs.enqueue(this.queue, 'confirm', { orderId });
  }
}

@Module({
  imports: [BullModule.registerQueue({ name: ORDERS })],
  providers: [OrdersProcessor, OrdersService],
  exports: [OrdersService],
})
class OrdersModule {}

describe('an app tested with nestjs-unique-jobs/testing', () => {
  let app: TestingModule;
  let orders: OrdersService;
  let processor: OrdersProcessor;
  let queue: Queue;
  const hold = (orderId: string) => processor.pending.set(orderId, held(orderId));
  const letGo = (orderId: string) => releases.get(orderId)?.();

  beforeAll(async () => {
    app = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        // Uniqueness stays on in tests, against the test Redis, under a prefix of the test run.
        UniqueJobsModule.forRoot({ prefix: PREFIX, logger: false }),
        OrdersModule,
      ],
    }).compile();
    await app.init();
    orders = app.get(OrdersService);
    processor = app.get(OrdersProcessor);
    queue = app.get<Queue>(getQueueToken(ORDERS));
    await processor.worker.waitUntilReady();
  });

  beforeEach(async () => {
    await resetLocks(app);
  });

  afterAll(async () => {
    for (const release of releases.values()) release();
    await app.close();
    const redis = redisClient();
    await deleteKeys(redis, [
      ...(await scanKeys(redis, `bull:${ORDERS}:*`)),
      ...(await scanKeys(redis, `${PREFIX}:*`)),
    ]);
    await redis.quit();
  });

  it('sees the lock of a pending order, deduplicates a second confirmation, and sees the lock go once it ran', async () => {
    hold('o-1');
    const first = await orders.confirm('o-1');
    expect(wasDeduplicated(first)).toBe(false);
    const job = first.status === 'enqueued' ? first.job : undefined;
    const state = await expectLocked(app, queue, 'confirm', { orderId: 'o-1' }, { holder: job!.id });
    expect(state.enqueue?.holders).toEqual([job!.id]);

    expect(wasDeduplicated(await orders.confirm('o-1'))).toBe(true);
    // queue.add (the log strategy) hands back the job that holds the lock, not one with the id asked for.
    expect(wasDeduplicated(await queue.add('confirm', { orderId: 'o-1' }, { jobId: 'retry-o-1' }), 'retry-o-1')).toBe(
      true,
    );
    await expect(expectNotLocked(app, queue, 'confirm', { orderId: 'o-1' })).rejects.toThrow(
      `is held by job(s) ${job!.id}`,
    );

    const unlocked = waitForUniqueJobEvent(app, 'unlocked', (event) => event.jobId === job!.id);
    letGo('o-1');
    await unlocked;
    await expectNotLocked(app, queue, 'confirm', { orderId: 'o-1' });
    expect(await isLocked(app, queue, 'confirm', { orderId: 'o-1' })).toBe(false);
    expect(wasDeduplicated(await orders.confirm('o-1'))).toBe(false);
  });

  it('sees the run-time lock of an order being shipped', async () => {
    hold('o-2');
    const running = waitForUniqueJobEvent(app, 'locked', (event) => event.lock === 'runtime');
    const job = await queue.add('ship', { orderId: 'o-2' });
    expect((await running).jobId).toBe(job.id);
    await UniqueJobsTesting.expectLocked(app, ORDERS, 'ship', { orderId: 'o-2' }, { kind: 'runtime', holder: job.id });
    await expect(
      UniqueJobsTesting.expectLocked(app, ORDERS, 'ship', { orderId: 'o-3' }, { kind: 'runtime' }),
    ).rejects.toThrow('but no lock is held');
    const released = UniqueJobsTesting.waitForEvent(app.get(UniqueJobsService), 'unlocked');
    letGo('o-2');
    expect((await released).lock).toBe('runtime');
    expect(await UniqueJobsTesting.isLocked(app, ORDERS, 'ship', { orderId: 'o-2' })).toBe(false);
  });

  it("resets this app's locks between tests, and nothing else", async () => {
    await processor.worker.pause();
    try {
      const redis = redisClient();
      const otherPrefix = `${uniqueName('other-app')}:{x}:queued`;
      const otherQueue = `bull:${uniqueName('other-queue')}:de:uj:v1:00`;
      try {
        await redis.set(otherPrefix, '1');
        await redis.set(otherQueue, '1');
        const pending = await orders.confirm('o-4');
        expect(pending.status).toBe('enqueued');
        expect(wasDeduplicated(await orders.confirm('o-4'))).toBe(true);
        expect(await isLocked(app, ORDERS, 'confirm', { orderId: 'o-4' })).toBe(true);

        expect(await resetLocks(app)).toBeGreaterThanOrEqual(1);
        expect(await isLocked(app, ORDERS, 'confirm', { orderId: 'o-4' })).toBe(false);
        expect(await scanKeys(redis, `${PREFIX}:*`)).toEqual([]);
        expect(await redis.exists(otherPrefix, otherQueue)).toBe(2);
        // With the lock gone, the same order is enqueued again (the reset does not remove jobs).
        expect(wasDeduplicated(await orders.confirm('o-4'))).toBe(false);
        expect(await queue.getWaitingCount()).toBe(2);
      } finally {
        await redis.del(otherPrefix, otherQueue);
        await redis.quit();
      }
    } finally {
      await queue.obliterate({ force: true });
      await processor.worker.resume();
    }
  });

  it('reports a missing event within its timeout', async () => {
    await expect(waitForUniqueJobEvent(app, 'lockLost', () => true, 50)).rejects.toThrow(
      'No "lockLost" unique-jobs event matching the predicate within 50 ms',
    );
  });
});
