import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Scope } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type { Job, Queue, Worker } from 'bullmq';
import { UniqueJob, UniqueJobsModule, UniqueJobsService } from '../lib/index.js';
import { deferred } from './support/deferred.js';
import { deleteNamespaces, lockKeys, openQueueEvents, redisClient, redisOptions, uniqueName } from './support/redis.js';

describe('a request-scoped processor', () => {
  const redis = redisClient();
  afterAll(async () => redis.quit());

  it('is guarded on every per-job instance, and its options are registered once', async () => {
    const queueName = uniqueName('scoped');
    const prefix = uniqueName('ujscoped');
    const started = deferred();
    const gate = deferred();
    const instances = new Set<object>();

    @Processor({ name: queueName, scope: Scope.REQUEST })
    @UniqueJob({ lock: 'until_executed', lockArgs: (data: { id: string }) => data.id })
    class ScopedProcessor extends WorkerHost {
      async process(job: Job<{ id: string }>) {
        instances.add(this);
        if (job.data.id === 'hold') {
          started.resolve();
          await gate.promise;
        }
        return job.data.id;
      }
    }

    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, prefix }),
      ],
      providers: [ScopedProcessor],
    }).compile();
    await moduleRef.init();
    const events = await openQueueEvents(queueName);
    await events.waitUntilReady();
    try {
      const queue = moduleRef.get<Queue>(getQueueToken(queueName));
      const service = moduleRef.get(UniqueJobsService);
      const held = await service.enqueue(queue, 'x', { id: 'hold' });
      if (held.status !== 'enqueued') throw new Error('not enqueued');
      await started.promise;
      await expect(service.enqueue(queue, 'x', { id: 'hold' })).resolves.toMatchObject({
        status: 'duplicate',
        existingJobId: held.job.id,
      });
      const other = await service.enqueue(queue, 'x', { id: 'other' });
      gate.resolve();
      await expect(held.job.waitUntilFinished(events)).resolves.toBe('hold');
      if (other.status !== 'enqueued') throw new Error('not enqueued');
      await expect(other.job.waitUntilFinished(events)).resolves.toBe('other');
      expect(instances.size).toBe(2); // one instance per job
      expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
    } finally {
      gate.resolve();
      await events.close();
      await moduleRef.close();
      await deleteNamespaces(redis, { queues: [queueName], prefixes: [prefix] });
    }
  });

  // Found by the hostile review of session 24: @nestjs/bullmq puts a request-scoped processor's worker on its static
  // instance, which the shutdown did not close before the lock client: the job finished after it, its lock stayed.
  it('closes its worker at shutdown before the lock client: a job still running releases its run-time lock', async () => {
    const queueName = uniqueName('scopedclose');
    const prefix = uniqueName('ujscopedclose');
    const started = deferred();
    const gate = deferred();
    @Processor({ name: queueName, scope: Scope.REQUEST })
    @UniqueJob({ lock: 'while_executing', lockArgs: (data: { id: string }) => data.id })
    class ScopedProcessor extends WorkerHost {
      async process(job: Job<{ id: string }>) {
        started.resolve();
        await gate.promise;
        return job.id;
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ prefix, logger: false }),
      ],
      providers: [ScopedProcessor],
    }).compile();
    await moduleRef.init();
    const errors: string[] = [];
    moduleRef.get(UniqueJobsService).events$.subscribe((event) => {
      if (event.type === 'error') errors.push(event.error.message);
    });
    try {
      await moduleRef.get<Queue>(getQueueToken(queueName)).add('x', { id: '1' });
      await started.promise;
      expect(await lockKeys(redis, prefix, queueName)).toHaveLength(1);
      // The job ends once its worker starts closing: before the lock client closes, or (the defect) after it.
      const host = moduleRef
        .get(DiscoveryService, { strict: false })
        .getProviders()
        .find((wrapper) => wrapper.metatype === ScopedProcessor)?.instance as { _worker?: Worker } | undefined;
      host?._worker?.once('closing', () => gate.resolve());
      await moduleRef.close();
      expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
      expect(await redis.zcard(`bull:${queueName}:completed`)).toBe(1);
      expect(errors).toEqual([]);
    } finally {
      gate.resolve();
      await deleteNamespaces(redis, { queues: [queueName], prefixes: [prefix] });
    }
  });
});
