// The default scope of @IdempotencyKey: no two (BullMQ prefix, queue, job name) share one. Found by a hostile review
// (session 42): job "email:send" of queue "app" (prefix bull) and job "send" of queue "email" under prefix "app" were
// one scope, "app:email:send": the second job's effect never ran, replayed from the first one's record.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { defaultIdempotencyScope, normalizeIdempotencyScope } from '../../lib/idempotency/stored-key.js';
import { RedisIdempotencyStore } from '../../lib/idempotency/stores/redis-idempotency.store.js';
import { deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';

interface Triple {
  prefix: string;
  queueName: string;
  name: string;
}

const scopeOf = (job: Triple) => normalizeIdempotencyScope(defaultIdempotencyScope(job));
/** A prefix in which `:` and `%` are likely (and `bull`, `{bull}`: the shared form). */
const prefixes = fc.oneof(
  fc.constantFrom('bull', '{bull}', 'app', 'a:b', 'a', 'a%3Ab', '%', 'app:email'),
  fc.stringMatching(/^[a-z:%{}]{1,6}$/),
);
/** A queue name: BullMQ refuses `:` in it. */
const queueNames = fc.oneof(fc.constantFrom('app', 'email', 'a', 'b', 'c'), fc.stringMatching(/^[a-z%{}]{1,5}$/));
const names = fc.oneof(fc.constantFrom('send', 'email:send', 'c:d', ':x', 'd'), fc.stringMatching(/^[a-z:%]{0,6}$/));
const triples = fc.record({ prefix: prefixes, queueName: queueNames, name: names });
/** `bull` and `{bull}` are one BullMQ prefix to the scope (a Cluster's queues keep the single Redis' records). */
const sameQueue = (a: Triple, b: Triple) =>
  (a.prefix === b.prefix || [a.prefix, b.prefix].every((prefix) => prefix === 'bull' || prefix === '{bull}')) &&
  a.queueName === b.queueName &&
  a.name === b.name;

describe('default idempotency scope', () => {
  it('keeps apart the job names and queues the review found sharing one', () => {
    const pairs: [Triple, Triple][] = [
      [
        { prefix: 'bull', queueName: 'app', name: 'email:send' },
        { prefix: 'app', queueName: 'email', name: 'send' },
      ],
      [
        { prefix: 'a:b', queueName: 'c', name: 'd' },
        { prefix: 'a', queueName: 'b', name: 'c:d' },
      ],
      [
        { prefix: 'bull', queueName: 'x', name: ':app:q:n' },
        { prefix: 'app', queueName: 'q', name: 'n' },
      ],
    ];
    for (const [a, b] of pairs) expect(scopeOf(a)).not.toBe(scopeOf(b));
    // Queues under bull (or {bull}) keep the scope they had.
    expect(scopeOf({ prefix: 'bull', queueName: 'payments', name: 'settle' })).toBe('payments:settle');
    expect(scopeOf({ prefix: '{bull}', queueName: 'payments', name: 'settle' })).toBe('payments:settle');
    expect(scopeOf({ prefix: 'tenant-a', queueName: 'payments', name: 'settle' })).toBe(':tenant-a:payments:settle');
  });

  it('gives two (prefix, queue, job name) one scope only when they are the same queue and job name', () => {
    fc.assert(
      fc.property(triples, triples, (a, b) => {
        expect(scopeOf(a) === scopeOf(b)).toBe(sameQueue(a, b));
      }),
      { numRuns: 3000 },
    );
  });

  it('keeps two records in the Redis store for the two jobs that shared one', async () => {
    const client = redisClient();
    const prefix = uniqueName('ujscope');
    try {
      const store = new RedisIdempotencyStore({ client, prefix });
      const jobs: Triple[] = [
        { prefix: 'bull', queueName: 'app', name: 'email:send' },
        { prefix: 'app', queueName: 'email', name: 'send' },
      ];
      const claims = [];
      for (const [i, job] of jobs.entries()) {
        const ref = { scope: scopeOf(job), key: 'user-42', owner: `owner-${i}` };
        claims.push(await store.claim({ ...ref, leaseMs: 30_000, fingerprint: undefined, jobId: `${i}` }));
        await store.complete(ref, { result: JSON.stringify(i), ttlMs: 60_000 });
      }
      expect(claims.map((claim) => claim.claimed)).toEqual([true, true]);
      expect(await scanKeys(client, `${prefix}:*`)).toHaveLength(2);
    } finally {
      await deleteKeys(client, await scanKeys(client, `${prefix}:*`));
      await client.quit();
    }
  });
});
