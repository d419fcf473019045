// A handler under @IdempotencyKey (or @UniqueJob) that throws `null` or `undefined` (not an Error). BullMQ reads the `name` of what a
// processor threw: with `null` or `undefined` its worker throws in turn, and the job stays active until it stalls,
// then runs again. The attempt must fail like any other: the job failed (or retried), its claim released, or kept as
// failed (`onFailure: 'keep'`) so that a later delivery of the key does not run the handler again.
import { describe, expect, it } from '@jest/globals';
import { IdempotencyKeyFailedError, RedisIdempotencyStore, type IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { Outcomes } from '../support/outcomes.js';
import { workerOf } from '../conflicts/helpers.js';
import { digestOf, runningKey } from '../support/locks.js';

const byKey = (job: IdempotencyJob<{ key: string }>) => job.data.key;

describe('@IdempotencyKey: a handler that throws null or undefined', () => {
  const { start, redis } = useApps('thrown-nullish');

  it.each([
    ['null', null],
    ['undefined', undefined],
  ])(
    "onFailure 'keep': thrown %s fails the job for good and keeps the failure; the next delivery does not run",
    async (label, thrown) => {
      let runs = 0;
      const app = await start({
        idempotency: { key: byKey, onFailure: 'keep' },
        handler: async () => {
          runs++;
          // eslint-disable-next-line @typescript-eslint/only-throw-error -- what the test is about
          throw thrown;
        },
      });
      const outcomes = new Outcomes(workerOf(app));
      const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
      const first = await app.queue.add('charge', { key: 'k' }, { attempts: 1 });
      const [failure] = await outcomes.failures(first.id!);
      expect(failure.message).toContain(label);
      expect(await app.queue.getJobState(first.id!)).toBe('failed');
      const record = await store.get(`${app.queue.name}:charge`, 'k');
      expect(record?.state).toBe('failed');

      const second = await app.queue.add('charge', { key: 'k' }, { attempts: 1 });
      expect((await outcomes.failures(second.id!))[0]).toBeInstanceOf(IdempotencyKeyFailedError);
      expect(runs).toBe(1);
    },
    15_000,
  );

  it("onFailure 'release' (default): thrown undefined is retried at once, not left active until it stalls", async () => {
    let runs = 0;
    const app = await start({
      idempotency: { key: byKey },
      handler: async () => {
        runs++;
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- what the test is about
        if (runs === 1) throw undefined;
        return 'done';
      },
    });
    const outcomes = new Outcomes(workerOf(app));
    const job = await app.queue.add('charge', { key: 'k' }, { attempts: 2 });
    expect(await outcomes.completed(job.id!)).toBe('done');
    expect(runs).toBe(2);
  }, 15_000);

  it('@UniqueJob while_executing: thrown null is retried at once, its run-time lock given back', async () => {
    let runs = 0;
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: (data: { key: string }) => data.key },
      handler: async () => {
        runs++;
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- what the test is about
        if (runs === 1) throw null;
        return 'done';
      },
    });
    const outcomes = new Outcomes(workerOf(app));
    const job = await app.queue.add('charge', { key: 'k' }, { attempts: 2 });
    expect(await outcomes.completed(job.id!)).toBe('done');
    expect(runs).toBe(2);
    expect(await redis.exists(runningKey(app.prefix, digestOf(app, 'charge', { key: 'k' })))).toBe(0);
  }, 15_000);
  it.each([
    [
      '@UniqueJob while_executing',
      { unique: { lock: 'while_executing', lockArgs: (data: { key: string }) => data.key } },
    ],
    ['@IdempotencyKey', { idempotency: { key: byKey } }],
  ] as const)(
    '%s: a process method (not async) that throws null synchronously is retried at once',
    async (_label, options) => {
      let runs = 0;
      const app = await start({
        ...options,
        syncProcess: true,
        handler: () => {
          runs++;
          // eslint-disable-next-line @typescript-eslint/only-throw-error -- what the test is about
          if (runs === 1) throw null;
          return Promise.resolve('done');
        },
      });
      const outcomes = new Outcomes(workerOf(app));
      const job = await app.queue.add('charge', { key: 'k' }, { attempts: 2 });
      expect(await outcomes.completed(job.id!)).toBe('done');
      expect(runs).toBe(2);
    },
    15_000,
  );
});
