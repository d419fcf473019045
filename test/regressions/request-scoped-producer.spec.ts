// Producers that are request-scoped (`Scope.REQUEST`, an instance per request) or durable (an instance per tenant, by a
// ContextIdStrategy), built after the application's init: `queue.add` of the guarded queue they inject and
// `UniqueJobsService.enqueue` apply the lock whatever instance calls them; a second registration of the queue in the
// producer's own feature module is guarded too. Duplicates from other instances are refused, and the lock is gone once
// the job ends.
import 'reflect-metadata';
import { afterAll, describe, expect, it } from '@jest/globals';
import { BullModule, InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Inject, Injectable, Module, Scope } from '@nestjs/common';
import {
  ContextIdFactory,
  REQUEST,
  type ContextId,
  type ContextIdStrategy,
  type HostComponentInfo,
} from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Job, Queue } from 'bullmq';
import { UniqueJob, UniqueJobsModule, UniqueJobsService, type EnqueueResult } from '../../lib/index.js';
import { deferred } from '../support/deferred.js';
import { hold, releaseHeld } from '../support/gates.js';
import {
  bullRootOptions,
  closeBullConnection,
  deleteNamespaces,
  lockKeys,
  openQueueEvents,
  redisClient,
  uniqueName,
} from '../support/redis.js';

interface Data {
  id: string;
  from: string;
}

/** The producer's interface, whatever its scope. */
interface Producer {
  readonly queue: Queue<Data>;
  /** The request this instance was built for (a request-scoped one), or undefined. */
  readonly request: unknown;
  send(id: string): Promise<Job<Data>>;
  sendExplicitly(id: string): Promise<EnqueueResult<Data>>;
}

/** Per-tenant context ids: a durable provider gets one instance per tenant, a plain request-scoped one per request. */
class TenantContexts implements ContextIdStrategy {
  private readonly tenants = new Map<string, ContextId>();

  attach(contextId: ContextId, request: { tenant: string }) {
    let tenant = this.tenants.get(request.tenant);
    if (!tenant) this.tenants.set(request.tenant, (tenant = ContextIdFactory.create()));
    return {
      resolve: (info: HostComponentInfo) => (info.isTreeDurable ? tenant : contextId),
      payload: request,
    };
  }
}

describe('a request-scoped or durable producer', () => {
  const redis = redisClient();
  afterAll(async () => {
    releaseHeld();
    await redis.quit();
  });

  async function boot(queueName: string, prefix: string, producer: new (...args: never[]) => Producer) {
    const gate = hold();
    const started = deferred<Job<Data>>();
    const ran: Data[] = [];

    @Processor(queueName)
    @UniqueJob({ lock: 'until_executed', lockArgs: (data: Data) => data.id })
    class HeldProcessor extends WorkerHost {
      async process(job: Job<Data>) {
        ran.push(job.data);
        started.resolve(job);
        await gate.promise;
        return job.data.from;
      }
    }

    // The producer lives in a feature module that registers the queue again (its own Queue instance).
    @Module({ imports: [BullModule.registerQueue({ name: queueName })], providers: [producer], exports: [producer] })
    class ProducerModule {}

    const bullRoot = bullRootOptions();
    const moduleRef: TestingModule = await Test.createTestingModule({
      imports: [
        BullModule.forRoot(bullRoot),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, prefix }),
        ProducerModule,
      ],
      providers: [HeldProcessor],
    }).compile();
    await moduleRef.init();
    const events = await openQueueEvents(queueName);
    const close = async () => {
      gate.resolve();
      await events.close();
      await moduleRef.close();
      await closeBullConnection(bullRoot.connection);
      await deleteNamespaces(redis, { queues: [queueName], prefixes: [prefix] });
    };
    return { moduleRef, events, gate, started, ran, close };
  }

  it('Scope.REQUEST: duplicates from other requests are refused (queue.add and enqueue), the lock ends with the job', async () => {
    const queueName = uniqueName('rsp');
    const prefix = uniqueName('ujrsp');

    @Injectable({ scope: Scope.REQUEST })
    class ScopedProducer implements Producer {
      constructor(
        @InjectQueue(queueName) readonly queue: Queue<Data>,
        private readonly uniqueJobs: UniqueJobsService,
        @Inject(REQUEST) readonly request: { name: string },
      ) {}

      send(id: string) {
        return this.queue.add('sync', { id, from: this.request.name });
      }

      sendExplicitly(id: string) {
        return this.uniqueJobs.enqueue(this.queue, 'sync', { id, from: this.request.name });
      }
    }

    const app = await boot(queueName, prefix, ScopedProducer);
    try {
      const inRequest = async (name: string) => {
        const contextId = ContextIdFactory.create();
        app.moduleRef.registerRequestByContextId({ name }, contextId);
        return app.moduleRef.resolve(ScopedProducer, contextId, { strict: false });
      };
      const one = await inRequest('one');
      const two = await inRequest('two');
      expect(one).not.toBe(two);
      expect(one.request).toEqual({ name: 'one' });
      const first = await one.send('u1');
      const held = await app.started.promise;
      expect(held.id).toBe(first.id);
      // Another request, through queue.add (BullMQ's convention: a handle with the holder's id) and the explicit API.
      expect((await two.send('u1')).id).toBe(first.id);
      await expect(two.sendExplicitly('u1')).resolves.toMatchObject({ status: 'duplicate', existingJobId: first.id });
      await expect((await inRequest('three')).sendExplicitly('u1')).resolves.toMatchObject({ status: 'duplicate' });
      expect(await redis.zcard(`bull:${queueName}:wait`)).toBe(0);
      expect(await lockKeys(redis, prefix, queueName)).toHaveLength(1);
      app.gate.resolve();
      await expect(first.waitUntilFinished(app.events)).resolves.toBe('one');
      expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
      // Free again: a later request enqueues.
      const later = await two.sendExplicitly('u1');
      expect(later.status).toBe('enqueued');
      if (later.status === 'enqueued') await expect(later.job.waitUntilFinished(app.events)).resolves.toBe('two');
      expect(app.ran.map((data) => data.from)).toEqual(['one', 'two']);
      expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('durable (one instance per tenant): duplicates from another tenant are refused, the lock ends with the job', async () => {
    const queueName = uniqueName('rsd');
    const prefix = uniqueName('ujrsd');

    @Injectable({ scope: Scope.REQUEST, durable: true })
    class TenantProducer implements Producer {
      constructor(
        @InjectQueue(queueName) readonly queue: Queue<Data>,
        private readonly uniqueJobs: UniqueJobsService,
        @Inject(REQUEST) readonly request: { tenant: string },
      ) {}

      send(id: string) {
        return this.queue.add('sync', { id, from: this.request.tenant });
      }

      sendExplicitly(id: string) {
        return this.uniqueJobs.enqueue(this.queue, 'sync', { id, from: this.request.tenant });
      }
    }

    const factory = ContextIdFactory as unknown as { strategy?: ContextIdStrategy };
    const previous = factory.strategy;
    ContextIdFactory.apply(new TenantContexts());
    const app = await boot(queueName, prefix, TenantProducer);
    try {
      const forTenant = (tenant: string) =>
        app.moduleRef.resolve(TenantProducer, ContextIdFactory.getByRequest({ tenant }), { strict: false });
      const a1 = await forTenant('a');
      const a2 = await forTenant('a');
      const b = await forTenant('b');
      expect(a1).toBe(a2); // durable: one instance per tenant
      expect(a1).not.toBe(b);
      const first = await a1.sendExplicitly('u1');
      expect(first.status).toBe('enqueued');
      if (first.status !== 'enqueued') return;
      await app.started.promise;
      await expect(b.sendExplicitly('u1')).resolves.toMatchObject({ status: 'duplicate', existingJobId: first.job.id });
      expect((await b.send('u1')).id).toBe(first.job.id);
      expect((await a2.send('u1')).id).toBe(first.job.id);
      expect(await lockKeys(redis, prefix, queueName)).toHaveLength(1);
      app.gate.resolve();
      await expect(first.job.waitUntilFinished(app.events)).resolves.toBe('a');
      expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
      const later = await b.send('u1');
      expect(later.id).not.toBe(first.job.id);
      await expect(later.waitUntilFinished(app.events)).resolves.toBe('b');
      expect(app.ran.map((data) => data.from)).toEqual(['a', 'b']);
      expect(await lockKeys(redis, prefix, queueName)).toEqual([]);
    } finally {
      factory.strategy = previous;
      await app.close();
    }
  });
});
