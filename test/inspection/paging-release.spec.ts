// Paging locks while others are released: a lock held the whole time must be listed (SCAN's own promise).
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { LockInspector } from '../../lib/index.js';
import { PrivateRedis } from '../support/private-redis.js';

describe('LockInspector paging', () => {
  let server: PrivateRedis;
  beforeAll(async () => {
    server = await PrivateRedis.start();
  });
  afterAll(async () => {
    await server.stop();
  });

  it('lists a lock held throughout, although a lock listed on an earlier page is released in between', async () => {
    const redis = server.admin;
    const key = (n: number) => `uj:{v1:${String(n).repeat(64)}}:expiring`;
    for (const n of [1, 2, 3]) await redis.zadd(key(n), Date.now() + 600_000, `job${n}`);
    const inspector = new LockInspector({ client: redis, prefix: 'uj', queues: [] });
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await inspector.listLocks({}, { cursor, limit: 1 });
      listed.push(...page.locks.map((lock) => lock.digest));
      // The first lock listed is released before the next page.
      if (cursor === undefined) await redis.del(key(1));
      cursor = page.cursor;
    } while (cursor !== '0');
    expect(listed).toEqual(expect.arrayContaining([`v1:${'2'.repeat(64)}`, `v1:${'3'.repeat(64)}`]));
    await redis.del(key(2), key(3));
  });

  it('lists every lock held throughout, although other keys go between pages and a SCAN batch reaches further', async () => {
    const redis = server.admin;
    // SCAN's COUNT counts every key it looks at: 3,000 keys that are no lock make a batch of 1,000 cover a part of the
    // key space only. A page full mid-batch scans that batch again; once those keys are gone the same SCAN cursor's
    // batch reaches further, over locks the first page never saw.
    const fillers = Array.from({ length: 3000 }, (_, n) => `other:${n}`);
    await redis.mset(Object.fromEntries(fillers.map((key) => [key, '1'])));
    const digests = Array.from({ length: 60 }, (_, n) => `v1:${createHash('sha256').update(String(n)).digest('hex')}`);
    for (const digest of digests) await redis.zadd(`uj:{${digest}}:expiring`, Date.now() + 600_000, 'job');
    const inspector = new LockInspector({ client: redis, prefix: 'uj', queues: [] });
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await inspector.listLocks({}, { cursor, limit: 3 });
      expect(page.locks.length).toBeLessThanOrEqual(3);
      listed.push(...page.locks.map((lock) => lock.digest));
      if (cursor === undefined) await redis.del(...fillers);
      cursor = page.cursor;
    } while (cursor !== '0');
    expect([...new Set(listed)].sort()).toEqual(digests.sort());
    await redis.del(...digests.map((digest) => `uj:{${digest}}:expiring`));
  });
});
