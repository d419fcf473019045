// Property-based, against real Redis with real workers: hostile values in job data (keys and values with `*`, `{`, `}`,
// newlines, spaces, `:`, quotes, NUL, lone surrogates, 1 MB strings), used as lock arguments, as idempotency keys, as
// job names (the default idempotency scope) and as the idempotency scope, never reach a Redis key name raw. Every key
// under the test's prefix and the queue's key space, sampled while the handlers run (run-time locks held) and after
// (idempotency records, until_expired locks), has one of the library's shapes: a v1 hex digest or a base64url sha256
// record id inside exactly one hash tag, or a BullMQ key with an id the library chose.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import type { IdempotencyJob } from '../../lib/index.js';
import { startApp, type TestApp } from '../support/app.js';
import { bullPrefix, deleteKeys, redisClient, scanKeys, uniqueName } from '../support/redis.js';
import { HOSTILE_CHARACTERS, hostileString, jsonish, markedHostileString, setProperty } from './arbitraries.js';

interface HostileData {
  key: string | number;
  payload: unknown;
  [field: string]: unknown;
}

/** A scope made of every hostile character. */
const HOSTILE_SCOPE = HOSTILE_CHARACTERS.join('');

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Job data whose every part is hostile: its idempotency key, a payload of hostile keys and values, one more field. */
const hostileData = (keyArbitrary: fc.Arbitrary<string | number>) =>
  fc
    .record({ key: keyArbitrary, payload: jsonish, field: markedHostileString, value: markedHostileString })
    .map(({ key, payload, field, value }) => {
      const data = { key, payload } as HostileData;
      if (field !== 'key' && field !== 'payload') setProperty(data, field, value);
      return data;
    });

const idempotencyKey = fc.oneof(
  { weight: 4, arbitrary: markedHostileString },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: markedHostileString.map((s) => s.repeat(30)) }, // over 255 characters: stored hashed
);

/**
 * What tells two idempotency keys apart: their text, lone surrogates included (a key that is not well-formed Unicode
 * is stored as the hash of its JSON text, so "a\ud800" and "a\udc00" stay distinct).
 */
const idempotencyIdentity = (key: string | number) => String(key);

/** Every key of the app: under its prefix and in its queue's key space. */
async function keysOf(redis: Redis, app: TestApp): Promise<string[]> {
  return [
    ...(await scanKeys(redis, `${app.prefix}:*`)),
    ...(await scanKeys(redis, `${bullPrefix()}:${app.queue.name}:*`)),
  ];
}

/**
 * Asserts every key has one of the library's shapes and holds none of the hostile strings (those with a character a
 * key of these shapes cannot hold).
 */
function expectSafeKeys(app: TestApp, keys: string[], hostile: string[]): void {
  const own = new RegExp(
    `^${escape(app.prefix)}:\\{(v1:[0-9a-f]{64}|[A-Za-z0-9_-]{43}|[a-z]+)\\}:(queued|running|idempotency|[a-z]+)$`,
  );
  const queue = new RegExp(
    `^${escape(bullPrefix())}:${escape(app.queue.name)}:(de:uj:v1:[0-9a-f]{64}|[A-Za-z0-9_-]+(:[a-z-]+)?)$`,
  );
  for (const key of keys) {
    if (key.startsWith(`${app.prefix}:`)) {
      expect(key).toMatch(own);
      // exactly one hash tag
      expect(key.split('{')).toHaveLength(2);
      expect(key.split('}')).toHaveLength(2);
    } else {
      expect(key).toMatch(queue);
    }
  }
  // (a text made only of characters a key shape may hold, such as "}", is covered by the shapes above)
  const unsafe = hostile.filter((text) => /[^\w.:{}-]/.test(text));
  for (const text of unsafe) for (const key of keys) expect(key.includes(text)).toBe(false);
}

/** The strings of a value: its keys and string leaves (what must never show up in a key name). */
function stringsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, item]) => [key, ...stringsOf(item)]);
}

describe('hostile job data never reaches a Redis key (real Redis, real workers)', () => {
  let redis: Redis;
  let scoped: TestApp;
  let byName: TestApp;
  /** Keys seen by handlers while they ran (their run-time locks held). */
  const seenWhileRunning: { app: TestApp; keys: string[] }[] = [];
  /** Every key any handler saw, over the whole file. */
  const everSeen = new Set<string>();
  const lockArgs = (data: HostileData) => [data.key, data.payload];

  beforeAll(async () => {
    redis = redisClient();
    // Every lock path on one queue, and @IdempotencyKey with a hostile scope on every job name.
    scoped = await startApp({
      queue: uniqueName('prop-hostile'),
      unique: [
        { jobName: 'charge', lock: 'until_executed', lockArgs },
        { jobName: 'refund', lock: 'until_and_while_executing', lockArgs },
        { jobName: 'settle', lock: 'until_expired', lockTtl: 60_000 },
        { jobName: 'sync', lock: 'while_executing', lockArgs },
        { jobName: 'batch', lock: 'until_executed', lockLimit: 2, uniqueAcross: 'queues', lockArgs },
      ],
      idempotency: { key: (job: IdempotencyJob<HostileData>) => job.data.key, scope: HOSTILE_SCOPE },
      handler: async () => {
        seenWhileRunning.push({ app: scoped, keys: await keysOf(redis, scoped) });
        return { ok: true };
      },
    });
    // Hostile job names: the default idempotency scope is "<queue>:<job name>".
    byName = await startApp({
      queue: uniqueName('prop-hostile'),
      unique: { lock: 'until_and_while_executing', lockArgs },
      idempotency: { key: (job: IdempotencyJob<HostileData>) => job.data.key },
      handler: async () => {
        seenWhileRunning.push({ app: byName, keys: await keysOf(redis, byName) });
        return 'done';
      },
    });
  });

  afterAll(async () => {
    await scoped?.close();
    await byName?.close();
    await redis?.quit();
  });

  /**
   * Enqueues the jobs through the library (their keys and digests are distinct), waits for each to complete, checks
   * every key seen while they ran and after; then deletes the app's records and locks, so that every run (fast-check
   * replays values while it shrinks) starts from a clean slate.
   */
  async function runAndCheck(app: TestApp, jobs: { name: string; data: HostileData }[]): Promise<void> {
    seenWhileRunning.length = 0;
    try {
      const results = [];
      for (const { name, data } of jobs) results.push(await app.service.enqueue(app.queue, name, data));
      expect(results.map((result) => result.status)).toEqual(jobs.map(() => 'enqueued'));
      for (const result of results) if (result.status === 'enqueued') await app.finished(result.job);
      const hostile = [
        ...jobs.flatMap(({ name, data }) => [name, ...stringsOf(data), String(data.key)]),
        HOSTILE_SCOPE,
      ];
      const after = await keysOf(redis, app);
      // every job left its idempotency record (the key and scope are in it, hashed in its key name)
      expect(after.filter((key) => key.endsWith(':idempotency'))).toHaveLength(jobs.length);
      expectSafeKeys(app, after, hostile);
      expect(seenWhileRunning).toHaveLength(jobs.length);
      for (const { app: seenBy, keys } of seenWhileRunning) {
        expect(seenBy).toBe(app);
        expectSafeKeys(app, keys, hostile);
        for (const key of keys) everSeen.add(key);
      }
    } finally {
      const own = await scanKeys(redis, `${app.prefix}:*`);
      await deleteKeys(redis, [...own, ...(await scanKeys(redis, `${bullPrefix()}:${app.queue.name}:de:*`))]);
    }
  }

  it('as lock arguments, idempotency keys and the idempotency scope, on every lock path', async () => {
    const jobs = fc.uniqueArray(
      fc.record({
        name: fc.constantFrom('charge', 'refund', 'settle', 'sync', 'batch'),
        data: hostileData(idempotencyKey),
      }),
      { minLength: 1, maxLength: 5, selector: (job) => idempotencyIdentity(job.data.key) },
    );
    // The first run is one job of every name (every lock path), hostile all the same: the generated batches are
    // random, and may leave a path out (a CI run once saw no semaphore key in 7 of them).
    const everyPath = (['charge', 'refund', 'settle', 'sync', 'batch'] as const).map((name, i) => ({
      name,
      data: { key: `${HOSTILE_SCOPE}${i}`, payload: { [HOSTILE_SCOPE]: HOSTILE_SCOPE } },
    }));
    await fc.assert(
      fc.asyncProperty(jobs, (batch) => runAndCheck(scoped, batch)),
      { numRuns: 7, examples: [[everyPath]] },
    );
    // the handlers saw run-time locks held and enqueue locks (semaphore and BullMQ deduplication), so the checks
    // above covered every kind of lock key
    const seen = [...everSeen];
    expect(seen.some((key) => key.endsWith(':running'))).toBe(true);
    expect(seen.some((key) => key.endsWith(':queued'))).toBe(true);
    expect(seen.some((key) => key.includes(':de:uj:v1:'))).toBe(true);
  });

  it('as job names (in the default idempotency scope) and lock arguments', async () => {
    const jobs = fc.uniqueArray(fc.record({ name: markedHostileString, data: hostileData(idempotencyKey) }), {
      minLength: 1,
      maxLength: 4,
      selector: (job) => idempotencyIdentity(job.data.key),
    });
    await fc.assert(
      fc.asyncProperty(jobs, (batch) => runAndCheck(byName, batch)),
      { numRuns: 5 },
    );
  });

  it('1 MB strings as a data key, a data value and an idempotency key', async () => {
    const MB = 1024 * 1024;
    // the property gets a short chunk (so a failure prints that, not a megabyte) and builds the 1 MB string itself
    const chunk = hostileString({ minLength: 1, maxLength: 6 });
    const names = fc.constantFrom('charge', 'refund', 'settle', 'sync', 'batch');
    await fc.assert(
      fc.asyncProperty(chunk, names, async (piece, name) => {
        const text = piece.repeat(Math.ceil(MB / piece.length)).slice(0, MB);
        const data = { key: `${text}*{x}\n`, payload: { [text]: text } } as HostileData;
        await runAndCheck(scoped, [{ name, data }]);
        const keys = await keysOf(redis, scoped);
        expect(Math.max(...keys.map((key) => key.length))).toBeLessThan(200);
      }),
      { numRuns: 2 },
    );
  });
});
