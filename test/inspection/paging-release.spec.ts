// Paging locks while others are released: a lock held the whole time must be listed (SCAN's own promise).
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
  });
});
