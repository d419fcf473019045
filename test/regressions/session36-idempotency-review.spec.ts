// Hostile review (session 36) of @IdempotencyKey as a user sees it (docs/idempotency.md). Each case failed before its
// fix.
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { Processor, WorkerHost } from '@nestjs/bullmq';
import { Queue, QueueEvents, type Job } from 'bullmq';
import {
  IdempotencyKey,
  InvalidUniqueJobOptionsError,
  RedisIdempotencyStore,
  type IdempotencyJob,
  type IdempotencyKeyOptions,
} from '../../lib/index.js';
import { ownerTag } from '../../lib/idempotency/waiters-channel.js';
import { stepHandler } from '../support/step-handler.js';
import { useApps } from '../support/apps.js';
import { bootstrapError } from '../support/bootstrap.js';
import { EventLog } from '../support/events.js';
import { bullOptions, lastEventId, redisClient, uniqueName } from '../support/redis.js';
import { useWaitingChannel } from '../support/waiting-channel.js';
import { queueEvent } from '../support/wait.js';

type StepData = { key: string; step?: number };

// A step that hands its claim over settles the key for the deliveries waiting for it, and its process remembered the
// key as settled for 2 s (late-announcement.spec.ts). A duplicate delivered in those 2 s met the parked record, delayed
// itself and announced itself; the process promoted it at once; it met the parked record again, and so on: about 700
// claims, delays and channel messages a second per duplicate for 2 s after every handover (1,400 to 1,800 in a 2.5 s
// probe). And a promotion that reached Redis before the duplicate's own move to delayed was lost, the duplicate
// forgotten: it then waited a whole lease after the step job completed (30 s, seen with `moveToWait` steps at
// concurrency 2). A waiting delivery now says whom it saw holding the key (a digest of the owner token), and the
// process that just settled it wakes only one that saw the holder that settled; one that saw another holder (the
// handover's resume token, a delivery that claimed the key since) is kept for that holder instead.
describe('session 36: a duplicate delivered while a step job is parked', () => {
  const { start } = useApps('s36-idem-parked');

  it('waits once (no claim loop) and replays as soon as the step job completes', async () => {
    const lease = 60_000; // a duplicate whose wake-up is lost waits this long: longer than the test
    const ran: string[] = [];
    const app = await start({
      idempotency: { key: (job: Job<StepData>) => job.data.key, fingerprint: ['key'], lease },
      handler: stepHandler(ran, { delayMs: 10 * 60_000 }),
    });
    const events = new EventLog(app);
    const first = await app.queue.add('charge', { key: 'k' });
    await events.next((e) => e.type === 'idempotencyHandedOver' && e.jobId === first.id);
    const duplicate = await app.queue.add('charge', { key: 'k' });
    await events.next((e) => e.type === 'idempotencyInProgress' && e.jobId === duplicate.id);
    await (await app.queue.getJob(first.id!))!.promote();
    await expect(app.finished(first.id!)).resolves.toBe('done');
    await expect(app.finished(duplicate.id!)).resolves.toBe('done'); // replayed
    expect(ran).toEqual([`${first.id}:1`, `${first.id}:2`]);
    expect(events.of('idempotencyInProgress').filter((e) => e.jobId === duplicate.id)).toHaveLength(1);
  }, 20_000);
});

describe('session 36: WaitingDuplicates after a handover', () => {
  const channel = useWaitingChannel('s36-idem-handover');
  /** Another process's delivery `jobId` announces it waits for `recordId`, having seen the owner `sawToken`. */
  const announce = (recordId: string, jobId: string, sawToken: string) =>
    channel.announcer.announce({ recordId, queue: channel.queue.qualifiedName, jobId, saw: ownerTag(sawToken) });

  it('leaves a delivery that saw the parked record to the job’s next delivery, which wakes it when it settles', async () => {
    const recordId = 'record-parked';
    const resumeToken = 'step:token-of-the-job';
    channel.holder.holding(recordId, channel.queue, 'attempt-1');
    channel.holder.settled(recordId, { handedOver: true });
    // Saw the parked record (owned by the resume token): promoted now, it would only meet it again.
    const parkedWaiter = await channel.queue.add('charge', {}, { delay: 10 * 60_000 });
    await announce(recordId, parkedWaiter.id!, resumeToken);
    // Saw the step's own claim, before the handover: woken at once, as before. Heard after the one above.
    const earlyWaiter = await channel.queue.add('charge', {}, { delay: 10 * 60_000 });
    const earlyPromoted = queueEvent(channel.queueEvents, 'waiting', earlyWaiter.id!);
    await announce(recordId, earlyWaiter.id!, 'attempt-1');
    await earlyPromoted;
    expect(await channel.queue.getJobState(parkedWaiter.id!)).toBe('delayed');
    // The job's next delivery resumes the record in this process, then completes it: the parked waiter runs.
    const promoted = queueEvent(channel.queueEvents, 'waiting', parkedWaiter.id!);
    channel.holder.holding(recordId, channel.queue, 'attempt-2');
    channel.holder.settled(recordId, { resumedFrom: resumeToken });
    await promoted;
    expect(await channel.queue.getJobState(parkedWaiter.id!)).toBe('waiting');
  });

  it('still wakes a delivery that saw the resumed record’s handover when its announcement comes after the completion', async () => {
    const recordId = 'record-resumed';
    const resumeToken = 'step:token-of-another-job';
    channel.holder.holding(recordId, channel.queue, 'attempt-3');
    channel.holder.settled(recordId, { resumedFrom: resumeToken }); // the later step completed the record
    const waiter = await channel.queue.add('charge', {}, { delay: 10 * 60_000 });
    const promoted = queueEvent(channel.queueEvents, 'waiting', waiter.id!);
    await announce(recordId, waiter.id!, resumeToken);
    await promoted;
    expect(await channel.queue.getJobState(waiter.id!)).toBe('waiting');
  });
});

// `scope` shares keys between job names and queues (docs/idempotency.md, "Scope"). Records live in a store: two
// processors declaring one scope on two stores (one left on the default Redis store, the other `store: 'sql'`) each
// found their own store empty, and both ran the effect of a key meant to run once, silently. Now the bootstrap fails,
// naming both processors and stores.
describe('session 36: one scope declared on two stores', () => {
  const byEvent = (job: IdempotencyJob<{ eventId: string }>) => job.data.eventId;

  function processor(name: string, queue: string, options: IdempotencyKeyOptions): new () => WorkerHost {
    @Processor(queue, { autorun: false })
    class Dynamic extends WorkerHost {
      async process(): Promise<void> {}
    }
    Object.defineProperty(Dynamic, 'name', { value: name });
    IdempotencyKey(options)(Dynamic);
    return Dynamic;
  }

  it('fails the bootstrap, naming both processors and stores', async () => {
    const [webhooks, reconcile] = [uniqueName('s36-scope-a'), uniqueName('s36-scope-b')];
    const error = await bootstrapError({
      queues: [webhooks, reconcile],
      providers: [
        processor('WebhookProcessor', webhooks, { key: byEvent, scope: 'payments', store: 'audit' }),
        processor('ReconcileProcessor', reconcile, { key: byEvent, scope: 'payments' }),
      ],
      module: (client) => ({
        idempotency: { stores: { audit: new RedisIdempotencyStore({ client, prefix: uniqueName('s36-scope') }) } },
      }),
    });
    expect(error).toBeInstanceOf(InvalidUniqueJobOptionsError);
    const invalid = error as InvalidUniqueJobOptionsError;
    expect(invalid.option).toBe('store');
    expect(invalid.message).toContain('"payments"');
    expect(invalid.message).toContain('WebhookProcessor');
    expect(invalid.message).toContain('ReconcileProcessor');
    expect(invalid.message).toContain('"audit"');
  });

  it('boots when they share the store (one registered under two names is one store)', async () => {
    const [webhooks, reconcile] = [uniqueName('s36-scope-a'), uniqueName('s36-scope-b')];
    const error = await bootstrapError({
      queues: [webhooks, reconcile],
      providers: [
        processor('WebhookProcessor', webhooks, { key: byEvent, scope: 'payments', store: 'audit' }),
        processor('ReconcileProcessor', reconcile, { key: byEvent, scope: 'payments', store: 'ledger' }),
        processor('RefundProcessor', uniqueName('s36-scope-c'), { key: byEvent, scope: 'refunds' }),
      ],
      module: (client) => {
        const store = new RedisIdempotencyStore({ client, prefix: uniqueName('s36-scope') });
        return { idempotency: { stores: { audit: store, ledger: store } } };
      },
    });
    expect(error).toBeUndefined();
  });
});

// The default scope was `<queue>:<job name>` whatever the queue's BullMQ prefix: a queue of the same name under another
// prefix (a tenant, another environment sharing the Redis and the module prefix) shared its records, so the tenant's
// job replayed the other's result and its handler never ran. Locks already kept prefixes apart (the digest has the
// prefix); the default scope now does too: `<prefix>:<queue>:<job name>` for a prefix other than `bull`/`{bull}`.
describe('session 36: the default scope of a queue under a BullMQ prefix of its own', () => {
  const { start, onCleanup } = useApps('s36-idem-tenant');

  it('keeps its records apart from the queue of the same name under bull', async () => {
    const idempotency = { key: (job: Job<{ key: string }>) => job.data.key };
    const home = await start({ idempotency, handler: async () => 'home' });
    const tenantPrefix = uniqueName('s36tenant');
    const tenant = await start({
      queue: home.queue.name,
      idempotency,
      handler: async () => 'tenant',
      module: { prefix: home.prefix },
      worker: { prefix: tenantPrefix },
    });
    const tenantQueue = new Queue(home.queue.name, { ...bullOptions(), prefix: tenantPrefix });
    const tenantEvents = new QueueEvents(home.queue.name, {
      ...bullOptions(),
      prefix: tenantPrefix,
      lastEventId: await lastEventId(tenantQueue),
    });
    onCleanup(async () => {
      await tenantQueue.obliterate({ force: true });
      await tenantEvents.close();
      await tenantQueue.close();
    });
    await tenantEvents.waitUntilReady();
    await expect(home.finished(await home.queue.add('charge', { key: 'evt-1' }))).resolves.toBe('home');
    const job = await tenantQueue.add('charge', { key: 'evt-1' });
    await expect(job.waitUntilFinished(tenantEvents)).resolves.toBe('tenant');
    const client = redisClient();
    const store = new RedisIdempotencyStore({ client, prefix: home.prefix });
    try {
      await expect(store.get(`${home.queue.name}:charge`, 'evt-1')).resolves.toMatchObject({ result: '"home"' });
      await expect(store.get(`:${tenantPrefix}:${home.queue.name}:charge`, 'evt-1')).resolves.toMatchObject({
        result: '"tenant"',
      });
    } finally {
      await client.quit();
    }
    expect(tenant.runs).toHaveLength(1);
  });
});
