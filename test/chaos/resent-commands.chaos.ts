// Scenario 3, made deterministic: what a killed connection does to an idempotency call. ioredis resends a command that
// was sent but not answered when its connection dropped (autoResendUnfulfilledCommands), so Redis may apply it twice:
// the caller sees the answer of the second application. The chaos run (redis-faults.chaos.ts) meets this now and then;
// here a store applies the call twice on every job, on the Redis store and a real Redis.
//
// - A claim applied twice: the second answer is "held, in progress" by the attempt's own owner token. The attempt holds
//   the key and must run at once, not wait a whole lease for itself and then take its own claim over.
// - A completion applied twice: the second answer is "not the owner any more" (the record is completed). The job is
//   completed, and must not be reported as a lost lease ("its effect may have run twice").
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { RedisIdempotencyStore, type IdempotencyStore } from '../../lib/index.js';
import { startApp, type TestApp } from '../support/app.js';
import { EventLog } from '../support/events.js';
import { redisClient, uniqueName } from '../support/redis.js';

/** The Redis store, with `claim` or `complete` applied twice (the caller gets the second answer). */
function resending(inner: RedisIdempotencyStore, twice: 'claim' | 'complete'): IdempotencyStore {
  return {
    name: `redis-resending-${twice}`,
    claim: async (request) => {
      const first = await inner.claim(request);
      return twice === 'claim' ? inner.claim(request) : first;
    },
    renew: (ref, leaseMs) => inner.renew(ref, leaseMs),
    complete: async (ref, completion) => {
      const first = await inner.complete(ref, completion);
      return twice === 'complete' ? inner.complete(ref, completion) : first;
    },
    fail: (ref, failure) => inner.fail(ref, failure),
    release: (ref) => inner.release(ref),
    get: (scope, key) => inner.get(scope, key),
    delete: (scope, key) => inner.delete(scope, key),
  };
}

describe('chaos: idempotency calls applied twice (a command resent after its connection dropped)', () => {
  const redis = redisClient();
  let app: TestApp | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(async () => {
    await redis.quit();
  });

  it.each(['claim', 'complete'] as const)(
    '%s applied twice: the job runs once, at once, completes, and nothing is reported lost',
    async (twice) => {
      const prefix = uniqueName('ujresend');
      const inner = new RedisIdempotencyStore({ client: redis, prefix });
      app = await startApp({
        queue: uniqueName('resend'),
        module: { prefix, idempotency: { stores: { resending: resending(inner, twice) } } },
        // The default lease (30 s): an attempt waiting for its own claim would outlast the test.
        idempotency: { key: (job) => (job.data as { key: string }).key, store: 'resending' },
        handler: async () => 'done',
      });
      const log = new EventLog(app);
      const job = await app.queue.add('effect', { key: 'K' });
      expect(await app.finished(job)).toBe('done');
      expect(app.runs).toHaveLength(1);
      expect(log.of('idempotencyClaimed')).toEqual([expect.objectContaining({ jobId: job.id, takeover: false })]);
      expect(log.of('idempotencyCompleted')).toEqual([expect.objectContaining({ jobId: job.id })]);
      expect(log.of('idempotencyInProgress')).toEqual([]);
      expect(log.of('idempotencyLeaseLost')).toEqual([]);
      expect(await inner.get(`${app.queue.name}:effect`, 'K')).toMatchObject({
        state: 'completed',
        attempts: 1,
        result: '"done"',
      });
    },
    20_000,
  );
});
