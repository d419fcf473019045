// The event stream end to end: every lock transition publishes its event (including the fast-path release BullMQ does
// itself, the run-time lock's wait and hold times, and a lost lock), listeners that throw break neither the job nor
// the other listeners nor the process (rxjs and @nestjs/event-emitter alike), and the log lines at their levels.
import { describe, expect, it } from '@jest/globals';
import { ConsoleLogger, Injectable, type LoggerService } from '@nestjs/common';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import { UnrecoverableError, type Job } from 'bullmq';
import { map } from 'rxjs';
import {
  DuplicateJobError,
  InvalidUniqueJobOptionsError,
  UniqueJobsEvents,
  UniqueJobsModule,
  type UniqueJobEvent,
  type UniqueJobsModuleOptions,
} from '../../lib/index.js';
import { spawnFixture } from '../support/fixtures.js';
import { EventLog } from '../support/events.js';
import { hold } from '../support/gates.js';
import { byId, dedupKey, digestOf, queuedKey, runningKey } from '../support/locks.js';
import { deleteKeys, scanKeys, uniqueName } from '../support/redis.js';
import { asTestApp, useObservedApps } from './helpers.js';

type Of<T extends UniqueJobEvent['type']> = Extract<UniqueJobEvent, { type: T }>;

/** A logger for `forRoot({ logger })` that keeps every line by level, debug included. */
function recordingLogger(): { logger: LoggerService; lines: Record<'debug' | 'log' | 'warn' | 'error', string[]> } {
  const lines = { debug: [] as string[], log: [] as string[], warn: [] as string[], error: [] as string[] };
  return {
    lines,
    logger: {
      debug: (message: unknown) => void lines.debug.push(String(message)),
      log: (message: unknown) => void lines.log.push(String(message)),
      warn: (message: unknown) => void lines.warn.push(String(message)),
      error: (message: unknown) => void lines.error.push(String(message)),
    },
  };
}

describe('unique-jobs events', () => {
  const { redis, start } = useObservedApps('events');

  it('reports a fast-path until_executed lock: locked, a duplicate with its strategy and holder, and unlocked once BullMQ deleted the key', async () => {
    const gate = hold();
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId },
      handler: async () => gate.promise,
    });
    const log = new EventLog(asTestApp(app));
    const digest = digestOf(asTestApp(app), 'pay', { id: 'p1' });
    const key = dedupKey(app.queue.name, digest);

    const job = await app.queue.add('pay', { id: 'p1' });
    const locked = (await log.next((e) => e.type === 'locked')) as Of<'locked'>;
    expect(locked).toMatchObject({ lock: 'enqueue', jobId: job.id, digest, queue: app.queue.name, jobName: 'pay' });
    expect(locked.waitedMs).toBeUndefined();

    const duplicate = await app.queue.add('pay', { id: 'p1' });
    expect(duplicate.id).toBe(job.id);
    expect(log.of('duplicate')).toEqual([
      expect.objectContaining({ side: 'client', strategy: 'log', existingJobId: job.id, digest }),
    ]);

    // The key is deleted by BullMQ as it completes the job: the event comes after, and says how long it was held.
    const keyAtUnlock = new Promise<string | null>((resolve) => {
      const subscription = app.service.events$.subscribe((event) => {
        if (event.type !== 'unlocked') return;
        subscription.unsubscribe();
        void redis.get(key).then(resolve);
      });
    });
    gate.resolve();
    await app.finished(job);
    expect(await keyAtUnlock).toBeNull();
    const unlocked = log.of('unlocked');
    expect(unlocked).toEqual([expect.objectContaining({ lock: 'enqueue', jobId: job.id, digest })]);
    expect(unlocked[0].heldMs).toBeGreaterThanOrEqual(0);
  });

  it('reports the release of a fast-path lock when its job fails for good', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId },
      handler: async () => {
        throw new UnrecoverableError('card declined');
      },
    });
    const log = new EventLog(asTestApp(app));
    const job = await app.queue.add('pay', { id: 'p2' });
    const unlocked = (await log.next((e) => e.type === 'unlocked')) as Of<'unlocked'>;
    expect(unlocked).toMatchObject({ lock: 'enqueue', jobId: job.id });
    expect(await job.getState()).toBe('failed');
    expect(await redis.get(dedupKey(app.queue.name, unlocked.digest))).toBeNull();
  });

  it('reports a run-time lock with how long the worker waited for it and how long it was held', async () => {
    const gate = hold();
    const started = hold();
    const app = await start({
      unique: { lock: 'until_and_while_executing', lockArgs: byId, lockTimeout: 10_000 },
      worker: { concurrency: 2 },
      handler: async (job: Job) => {
        if ((job.data as { n: number }).n === 1) {
          started.resolve();
          await gate.promise;
        }
        return (job.data as { n: number }).n;
      },
    });
    const log = new EventLog(asTestApp(app));
    const first = await app.queue.add('sync', { id: 's', n: 1 });
    await started.promise;
    // Job 1 released its enqueue lock on start, so job 2 is enqueued and waits for the run-time lock.
    const second = await app.queue.add('sync', { id: 's', n: 2 });
    expect(second.id).not.toBe(first.id);
    gate.resolve();
    await app.finished(second);
    const digest = digestOf(asTestApp(app), 'sync', { id: 's' });

    const runtimeLocked = log.of('locked').filter((e) => e.lock === 'runtime');
    expect(runtimeLocked.map((e) => e.jobId)).toEqual([first.id, second.id]);
    expect(runtimeLocked.every((e) => e.digest === digest && typeof e.waitedMs === 'number')).toBe(true);
    const runtimeUnlocked = log.of('unlocked').filter((e) => e.lock === 'runtime');
    expect(runtimeUnlocked.map((e) => e.jobId)).toEqual([first.id, second.id]);
    expect(runtimeUnlocked.every((e) => typeof e.heldMs === 'number' && e.heldMs >= 0)).toBe(true);
    const enqueueUnlocked = log.of('unlocked').filter((e) => e.lock === 'enqueue');
    expect(enqueueUnlocked.map((e) => e.jobId)).toEqual([first.id, second.id]);
    expect(await redis.exists(runningKey(app.prefix, digest))).toBe(0);
  });

  it('reports a lost run-time lock as an event and an error line', async () => {
    const { logger, lines } = recordingLogger();
    const lost = hold();
    const app = await start({
      module: { logger },
      unique: { lock: 'while_executing', lockArgs: byId, runtimeLockLease: 300 },
      handler: async (job: Job) => {
        // Somebody deletes the lock while the job runs: the next renewal finds it gone.
        await redis.del(runningKey(app.prefix, digestOf(asTestApp(app), job.name, job.data)));
        await lost.promise;
        return 'done';
      },
    });
    const log = new EventLog(asTestApp(app));
    void log.next((e) => e.type === 'lockLost').then(() => lost.resolve());
    const job = await app.queue.add('sync', { id: 'lost' });
    expect(await app.finished(job)).toBe('done');
    expect(log.of('lockLost')).toEqual([expect.objectContaining({ jobId: job.id, jobName: 'sync' })]);
    expect(lines.error.some((line) => line.includes(`Run-time lock of job ${job.id}`))).toBe(true);
  });

  it('keeps a general-path (semaphore) lock reported too: locked and unlocked with its hold time', async () => {
    const app = await start({ unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 } });
    const log = new EventLog(asTestApp(app));
    const job = await app.queue.add('pay', { id: 'sem' });
    await app.finished(job);
    const unlocked = (await log.next((e) => e.type === 'unlocked')) as Of<'unlocked'>;
    expect(log.of('locked')).toEqual([expect.objectContaining({ lock: 'enqueue', jobId: job.id })]);
    expect(unlocked).toMatchObject({ lock: 'enqueue', jobId: job.id });
    expect(unlocked.heldMs).toBeGreaterThanOrEqual(0);
    expect(await redis.exists(queuedKey(app.prefix, unlocked.digest))).toBe(0);
  });

  it('keeps the job and the other subscribers going when subscribers throw, reject or fail in their pipe', async () => {
    const { logger, lines } = recordingLogger();
    const app = await start({
      module: { logger },
      unique: { lock: 'until_executed', lockArgs: byId },
      handler: async () => 'ok',
    });
    const seen: string[] = [];
    app.service.events$.subscribe(() => {
      throw new Error('subscriber threw');
    });
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- an async subscriber is what is tested
    app.service.events$.subscribe(async () => {
      await Promise.resolve();
      throw new Error('subscriber rejected');
    });
    app.service.events$.subscribe({
      next: () => {
        throw new Error('observer threw');
      },
    });
    app.service.events$
      .pipe(
        map(() => {
          throw new Error('operator threw');
        }),
      )
      .subscribe(() => undefined);
    const log = new EventLog(asTestApp(app));
    app.service.events$.subscribe((event) => seen.push(event.type));
    const job = await app.queue.add('pay', { id: 'x' });
    expect(await app.finished(job)).toBe('ok');
    await log.next((e) => e.type === 'unlocked');
    expect(seen).toEqual(['locked', 'unlocked']);
    expect(await job.getState()).toBe('completed');
    // The async rejection is reported once its promise settles: wait for that line (no other event marks it).
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.error.filter((line) => line.includes('subscriber threw'))).toHaveLength(2);
    expect(lines.error.filter((line) => line.includes('observer threw'))).toHaveLength(2);
    expect(lines.error.filter((line) => line.includes('subscriber rejected'))).toHaveLength(2);
    // An error in a pipe ends that subscription (rxjs semantics), reported once; the others carry on.
    expect(lines.error.filter((line) => line.includes('operator threw'))).toHaveLength(1);
    // Jest fails a test whose code throws at process level, so reaching this line also says nothing escaped.
  });

  it('in a real process, no throwing listener (rxjs, EventEmitter2, @OnEvent) reaches process level or fails the job', async () => {
    const queue = uniqueName('events-fixture');
    const prefix = uniqueName('ujo');
    const fixture = spawnFixture('throwing-listeners', { QUEUE: queue, PREFIX: prefix });
    try {
      const { result } = (await fixture.waitFor((message) => 'result' in message)) as {
        result: {
          returned: unknown;
          state: string;
          jobId: string;
          duplicateId: string;
          received: Record<'rx' | 'emitter' | 'onEvent' | 'onAny', string[]>;
          atProcessLevel: string[];
          loggedErrors: string[];
        };
      };
      expect(result.atProcessLevel).toEqual([]);
      expect(result.returned).toBe('ran:a');
      expect(result.state).toBe('completed');
      expect(result.duplicateId).toBe(result.jobId);
      const transitions = ['locked', 'duplicate', 'unlocked'];
      expect(result.received.rx).toEqual(transitions);
      expect(result.received.emitter).toEqual(transitions);
      expect(result.received.onEvent).toEqual(transitions);
      expect(result.received.onAny).toEqual(transitions.map((type) => `unique-jobs.${type}`));
      for (const thrown of [
        'rxjs subscriber threw',
        'async rxjs subscriber rejected',
        'operator in a pipe threw',
        'EventEmitter2 listener threw',
        'async EventEmitter2 listener rejected',
        '@OnEvent handler without suppressErrors threw',
        'a thrown object without a string form',
      ]) {
        expect(result.loggedErrors.some((line) => line.includes(thrown))).toBe(true);
      }
      const { code, stderr } = await fixture.exited;
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    } finally {
      fixture.child.kill('SIGKILL');
      await fixture.exited;
      await deleteKeys(redis, [
        ...(await scanKeys(redis, `bull:${queue}:*`)),
        ...(await scanKeys(redis, `${prefix}:*`)),
      ]);
    }
  });

  it('forwards every event to EventEmitter2 as unique-jobs.<type>, to @OnEvent handlers and plain listeners', async () => {
    const received: UniqueJobEvent[] = [];
    @Injectable()
    class OnLocked {
      @OnEvent('unique-jobs.locked')
      locked(event: UniqueJobEvent): void {
        received.push(event);
      }
    }
    const app = await start({
      imports: [EventEmitterModule.forRoot()],
      providers: [OnLocked],
      unique: { lock: 'until_executed', lockArgs: byId },
    });
    const emitter = app.moduleRef.get(EventEmitter2);
    const unlocked = new Promise<UniqueJobEvent>((resolve) => emitter.once('unique-jobs.unlocked', resolve));
    const job = await app.queue.add('pay', { id: 'ee' });
    await app.finished(job);
    expect(await unlocked).toMatchObject({ type: 'unlocked', jobId: job.id, lock: 'enqueue' });
    expect(received).toEqual([expect.objectContaining({ type: 'locked', jobId: job.id })]);
  });

  describe('log lines', () => {
    // Nest's default logger writes every level: a line per lock taken and given back was two lines per job in every
    // application that never chose its levels (and the events were built for them).
    it('logs no line for what a healthy job does, with a logger that writes every level; a duplicate at its level', async () => {
      const { logger, lines } = recordingLogger();
      const app = await start({
        module: { logger },
        unique: [{ lock: 'until_executed', lockArgs: byId, onConflict: { client: 'raise' } }],
      });
      const events = app.moduleRef.get(UniqueJobsEvents);
      expect(events.observes('locked')).toBe(false);
      expect(events.observes('unlocked')).toBe(false);
      const log = new EventLog(asTestApp(app)); // to wait for the lock's release: a listener, not a log line
      const job = await app.queue.add('pay', { id: 'l0' });
      await expect(app.queue.add('pay', { id: 'l0' })).rejects.toThrow(DuplicateJobError);
      await app.finished(job);
      await log.next((e) => e.type === 'unlocked');
      expect(lines.debug).toEqual([]);
      expect(lines.log).toEqual([
        expect.stringMatching(/^Duplicate job "pay" .*locked by job .*: handled by strategy "raise"/),
      ]);
      expect(lines.warn).toEqual([]);
    });

    it('logs locks at debug when logLevels asks, a duplicate of the log strategy once (its warning)', async () => {
      const { logger, lines } = recordingLogger();
      const app = await start({
        module: { logger, logLevels: { locked: 'debug', unlocked: 'debug' } },
        unique: [{ lock: 'until_executed', lockArgs: byId, onConflict: { client: 'raise' } }],
      });
      const log = new EventLog(asTestApp(app));
      const job = await app.queue.add('pay', { id: 'l1' });
      await expect(app.queue.add('pay', { id: 'l1' })).rejects.toThrow(DuplicateJobError);
      await app.finished(job);
      await log.next((e) => e.type === 'unlocked');
      expect(lines.debug).toEqual([
        expect.stringMatching(
          new RegExp(`^Locked enqueue lock of job "pay" on queue "${app.queue.name}" for job ${job.id}`),
        ),
        expect.stringMatching(
          new RegExp(
            `^Released enqueue lock of job "pay" on queue "${app.queue.name}" held by job ${job.id} .* after \\d+ ms$`,
          ),
        ),
      ]);
      expect(lines.log).toEqual([
        expect.stringMatching(/^Duplicate job "pay" .*locked by job .*: handled by strategy "raise"/),
      ]);
      expect(lines.warn).toEqual([]);
    });

    it('takes levels from forRoot({ logLevels }) and rejects an unknown type or level at bootstrap', async () => {
      const { logger, lines } = recordingLogger();
      const app = await start({
        module: { logger, logLevels: { locked: false, unlocked: 'warn', duplicate: 'error' } },
        unique: { lock: 'until_executed', lockArgs: byId },
        paused: true,
      });
      await app.queue.add('pay', { id: 'l2' });
      await app.queue.add('pay', { id: 'l2' });
      expect(lines.debug).toEqual([]);
      // The log strategy warns itself; the option asks for an error line of the event as well.
      expect(lines.warn).toEqual([expect.stringMatching(/^Skipping duplicate job "pay"/)]);
      expect(lines.error).toEqual([expect.stringMatching(/^Duplicate job "pay" .*handled by strategy "log"/)]);

      for (const logLevels of [{ lokced: 'debug' }, { locked: 'info' }]) {
        const build = Test.createTestingModule({
          imports: [
            UniqueJobsModule.forRoot({
              prefix: uniqueName('ujo'),
              logLevels: logLevels as UniqueJobsModuleOptions['logLevels'],
            }),
          ],
        }).compile();
        await expect(build).rejects.toThrow(InvalidUniqueJobOptionsError);
      }
    });

    it("writes Nest's default logger lines once, with the UniqueJobs context (no stray second message)", async () => {
      const printed: { message: unknown; context: string | undefined }[] = [];
      class Capturing extends ConsoleLogger {
        protected override printMessages(messages: unknown[], context?: string): void {
          for (const message of messages) printed.push({ message, context });
        }
      }
      const app = await start({
        module: { logger: new Capturing(), logLevels: { locked: 'debug' } },
        unique: { lock: 'until_executed', lockArgs: byId },
        paused: true,
      });
      await app.queue.add('pay', { id: 'n1' });
      await app.queue.add('pay', { id: 'n1' });
      expect(printed).toEqual([
        { message: expect.stringMatching(/^Locked enqueue lock/), context: 'UniqueJobs' },
        { message: expect.stringMatching(/^Skipping duplicate job "pay"/), context: 'UniqueJobs' },
      ]);
    });

    // The default log lines subscribed to the stream, so every event was built and described for every job even when
    // the application's logger leaves their level out (`locked` is `debug`): 0.03–0.16 of the worker's throughput
    // (session 38, docs/performance.md). An event reaches the log lines only when its level is written.
    it("builds no event for a level the application's logger leaves out, until something subscribes", async () => {
      const printed: unknown[] = [];
      class Capturing extends ConsoleLogger {
        protected override printMessages(messages: unknown[]): void {
          printed.push(...messages);
        }
      }
      const app = await start({
        module: {
          logger: new Capturing({ logLevels: ['log', 'warn', 'error'] }),
          logLevels: { locked: 'debug', unlocked: 'debug' },
        },
        unique: { lock: 'until_executed', lockArgs: byId },
        paused: true,
      });
      const events = app.moduleRef.get(UniqueJobsEvents);
      expect(events.observes('locked')).toBe(false);
      expect(events.observes('unlocked')).toBe(false);
      expect(events.observes('duplicate')).toBe(true); // logged at 'log'
      await app.queue.add('pay', { id: 'q1' });
      await app.queue.add('pay', { id: 'q1' });
      expect(printed).toEqual([expect.stringMatching(/^Skipping duplicate job "pay"/)]);

      const seen: string[] = [];
      const subscription = events.events$.subscribe((event) => seen.push(event.type));
      expect(events.observes('locked')).toBe(true);
      await app.queue.add('pay', { id: 'q2' });
      subscription.unsubscribe();
      expect(seen).toEqual(['locked']);
      expect(events.observes('locked')).toBe(false);
      expect(printed).toHaveLength(1); // still no debug line
    });
  });
});
