// Paging locks while others are released: a lock held the whole time must be listed (SCAN's own promise).
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Command } from 'ioredis';
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
  // Each case starts from an empty server, whatever an earlier one left on failing.
  beforeEach(async () => {
    await server.admin.flushall();
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

  /** Every page of a listing, `between` run after each; bounded (a listing that never ends fails). */
  async function pageAll(inspector: LockInspector, limit: number, between: (page: number) => Promise<unknown>) {
    const listed = new Set<string>();
    const cursors: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await inspector.listLocks({}, { cursor, limit });
      expect(page.locks.length).toBeLessThanOrEqual(limit);
      for (const lock of page.locks) listed.add(lock.digest);
      cursor = page.cursor;
      cursors.push(cursor);
      await between(cursors.length);
    } while (cursor !== '0' && cursors.length < 2000);
    expect(cursor).toBe('0');
    return { listed: [...listed].sort(), cursors };
  }

  /** `n` held locks (until_expired shape) of digests made from `seed`, sorted. */
  async function holdLocks(seed: string, n: number): Promise<string[]> {
    const digests = Array.from(
      { length: n },
      (_, i) => `v1:${createHash('sha256').update(`${seed}:${i}`).digest('hex')}`,
    );
    const held = server.admin.pipeline();
    for (const digest of digests) held.zadd(`uj:{${digest}}:expiring`, Date.now() + 600_000, 'job');
    await held.exec();
    return digests.sort();
  }

  /** A client of the private server that records each command it sends, as `format` writes it (default: its name). */
  function recordingClient(format: (command: Command) => string = (command) => command.name) {
    const client = server.admin.duplicate();
    const asked: string[] = [];
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command: Command, stream?: unknown) => {
      asked.push(format(command));
      return send(command, stream as never);
    };
    return { client, asked };
  }

  /** Keys that are no lock, `other:<from>` to `other:<from + n - 1>`: made, or deleted. */
  const others = {
    add: async (from: number, n: number) => {
      if (n > 0)
        await server.admin.mset(Object.fromEntries(Array.from({ length: n }, (_, i) => [`other:${from + i}`, '1'])));
    },
    del: async (from: number, n: number) => {
      if (n > 0) await server.admin.del(...Array.from({ length: n }, (_, i) => `other:${from + i}`));
    },
  };

  it('lists every lock held throughout, although other keys go between pages and a SCAN batch reaches further', async () => {
    // SCAN's COUNT counts every key it looks at: 3,000 keys that are no lock make a batch of 1,000 cover a part of the
    // key space only. Once they are gone the same SCAN cursor's batch reaches further, over locks no page saw yet: a
    // listing that resumed within that batch by the locks' own order skipped those before it.
    await others.add(0, 3000);
    const digests = await holdLocks('reach', 60);
    const inspector = new LockInspector({ client: server.admin, prefix: 'uj', queues: [] });
    const { listed } = await pageAll(inspector, 3, (page) => (page === 1 ? others.del(0, 3000) : Promise.resolve()));
    expect(listed).toEqual(digests);
    await server.admin.flushall();
  });

  it('reaches the end while other keys come and go between every two pages', async () => {
    // A queue's turnover: 20 new keys and the 20 oldest gone between pages. A listing that re-scanned a batch whole
    // whenever it had changed listed its first locks again and again, and never ended.
    await others.add(0, 3000);
    const digests = await holdLocks('churn', 60);
    const inspector = new LockInspector({ client: server.admin, prefix: 'uj', queues: [] });
    let next = 3000;
    const { listed, cursors } = await pageAll(inspector, 3, async () => {
      await others.add(next, 20);
      await others.del(next - 3000, 20);
      next += 20;
    });
    expect(listed).toEqual(digests);
    expect(cursors.length).toBeLessThan(60);
    await server.admin.flushall();
  });

  it('splits a hash bucket that holds more locks than a page, and still ends and misses none under churn', async () => {
    // Nothing but locks, one a page: many hash buckets hold two or more, the only batches a page splits.
    const digests = await holdLocks('dense', 400);
    const inspector = new LockInspector({ client: server.admin, prefix: 'uj', queues: [] });
    const { listed, cursors } = await pageAll(inspector, 1, async (page) => {
      await others.add(page * 50, 50);
      await others.del((page - 1) * 50, 50);
    });
    expect(listed).toEqual(digests);
    expect(cursors.some((cursor) => cursor.includes('-'))).toBe(true); // a split batch's cursor names its end
    await server.admin.flushall();
  });

  it('reads each key once a page although a batch too big for it is scanned again (a queue filter)', async () => {
    // 2,000 library locks owned by no job of qA (each read, then dropped) beside 2,000 deduplication keys, half qA's:
    // a first batch of 1,000 keys holds far more than 50 of qA's, so it is scanned again with a smaller COUNT.
    await holdLocks('library', 2000);
    const pipeline = server.admin.pipeline();
    for (let n = 0; n < 2000; n++) {
      const digest = createHash('sha256').update(`d${n}`).digest('hex');
      pipeline.set(`bull:${n % 2 === 0 ? 'qA' : 'qB'}:de:uj:v1:${digest}`, `j${n}`);
    }
    await pipeline.exec();
    // What the inspector asks of Redis, by command and key (every read of a lock asks its PTTL once).
    const { client, asked } = recordingClient((command) => `${command.name} ${String(command.args[0])}`);
    const queues = [
      { name: 'qA', prefix: 'bull' },
      { name: 'qB', prefix: 'bull' },
    ];
    const inspector = new LockInspector({ client, prefix: 'uj', queues });
    const page = await inspector.listLocks({ queue: 'qA' }, { limit: 50 });
    client.disconnect();
    expect(page.locks).toHaveLength(50);
    expect(page.locks.every((lock) => lock.queue === 'qA')).toBe(true);
    expect(asked.filter((line) => line.startsWith('scan ')).length).toBeGreaterThan(1); // scanned again
    const reads = asked.filter((line) => line.startsWith('pttl '));
    expect(reads.length).toBeGreaterThanOrEqual(50);
    expect(new Set(reads).size).toBe(reads.length);
    await server.admin.flushall();
  });

  it('pages a job-id filter through every lock of the job, reading each lock of another job with one command', async () => {
    // 1,000 locks of other jobs; the job `J` holds 6 locks alone, a 7th deduplication key, and an 8th lock among 25
    // holders where its lease is the last (past the 20 owners a lock read lists) .
    const others = await holdLocks('others', 1000);
    const mine = (await holdLocks('mine', 6)).map((digest) => digest);
    const pipeline = server.admin.pipeline();
    for (const digest of mine)
      pipeline.zadd(`uj:{${digest}}:expiring`, Date.now() + 600_000, 'J').zrem(`uj:{${digest}}:expiring`, 'job');
    const crowded = `v1:${createHash('sha256').update('crowded').digest('hex')}`;
    for (let i = 0; i < 24; i++) pipeline.zadd(`uj:{${crowded}}:expiring`, Date.now() + 600_000 + i, `o${i}`);
    pipeline.zadd(`uj:{${crowded}}:expiring`, Date.now() + 700_000, 'J');
    const deduplicated = createHash('sha256').update('dedup').digest('hex');
    pipeline.set(`bull:qA:de:uj:v1:${deduplicated}`, 'J');
    for (let n = 0; n < 200; n++)
      pipeline.set(`bull:qA:de:uj:v1:${createHash('sha256').update(`d${n}`).digest('hex')}`, `j${n}`);
    await pipeline.exec();
    const { client, asked } = recordingClient();
    const inspector = new LockInspector({ client, prefix: 'uj', queues: [{ name: 'qA', prefix: 'bull' }] });
    const listed: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await inspector.listLocks({ jobId: 'J' }, { cursor, limit: 2 });
      expect(page.locks.length).toBeLessThanOrEqual(2);
      for (const lock of page.locks) {
        expect(lock.owners.map((owner) => owner.jobId)).toContain('J');
        listed.push(lock.digest);
      }
      cursor = page.cursor;
    } while (cursor !== '0' && ++pages < 1000);
    client.disconnect();
    expect(cursor).toBe('0');
    expect(listed.sort()).toEqual([...mine, crowded, `v1:${deduplicated}`].sort());
    expect(others).toHaveLength(1000);
    // A lock of another job costs one read (its holders, or its holder), the job's own a few more.
    const count = (name: string) => asked.filter((asking) => asking === name).length;
    expect(count('zrange') + count('get')).toBeGreaterThanOrEqual(1200);
    expect(count('zcard')).toBeLessThanOrEqual(7 * 3);
    expect(count('pttl')).toBeLessThanOrEqual(8 * 3);
    await server.admin.flushall();
  });

  it('reads no more than a page needs when a job id holds many locks (ids repeat across queues)', async () => {
    // 300 locks, each held by job `1` and 4 other jobs: a page of 1 reads about one lock whole, not hundreds.
    const digests = await holdLocks('shared', 300);
    const pipeline = server.admin.pipeline();
    for (const digest of digests)
      for (const id of ['1', '2', '3', '4']) pipeline.zadd(`uj:{${digest}}:expiring`, Date.now() + 600_000, id);
    await pipeline.exec();
    const { client, asked } = recordingClient();
    const inspector = new LockInspector({ client, prefix: 'uj', queues: [{ name: 'qA', prefix: 'bull' }] });
    const first = await inspector.listLocks({ jobId: '1' }, { limit: 1 });
    expect(first.locks).toHaveLength(1);
    // A lock read whole costs a ZCARD (and a transaction per owner): about one a page, the rest screened on one read.
    expect(asked.filter((name) => name === 'zcard').length).toBeLessThanOrEqual(3);
    const listed = new Set(first.locks.map((lock) => lock.digest));
    let cursor = first.cursor;
    let pages = 1;
    while (cursor !== '0' && pages++ < 2000) {
      const page = await inspector.listLocks({ jobId: '1' }, { cursor, limit: 1 });
      expect(page.locks.length).toBeLessThanOrEqual(1);
      for (const lock of page.locks) listed.add(lock.digest);
      cursor = page.cursor;
    }
    client.disconnect();
    expect([...listed].sort()).toEqual(digests);
    expect(asked.filter((name) => name === 'zcard').length).toBeLessThanOrEqual(3 * pages);
    await server.admin.flushall();
  });

  it('misses no lock held throughout while the key space grows, shrinks and rehashes between pages', async () => {
    let seed = 46;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 30; round++) {
      await server.admin.config('SET', 'activerehashing', random(2) ? 'yes' : 'no');
      let first = 0;
      let next = random(20_000);
      await others.add(0, next);
      const digests = await holdLocks(`round-${round}`, 5 + random(80));
      const inspector = new LockInspector({ client: server.admin, prefix: 'uj', queues: [] });
      const { listed } = await pageAll(inspector, 1 + random(7), async () => {
        const move = random(6);
        const n = move < 2 ? random(20_000) : random(3000);
        if (move === 0 || move === 2) {
          await others.add(next, n);
          next += n;
        } else if (move === 1 || move === 3) {
          const gone = Math.min(n, next - first) - (move === 1 ? random(50) : 0); // move 1: nearly all (a shrink)
          await others.del(first, Math.max(gone, 0));
          first += Math.max(gone, 0);
        }
      });
      expect([round, listed]).toEqual([round, digests]);
      await server.admin.flushall();
    }
  }, 120_000); // 30 listings: ~5 s alone, several times that beside other suites on 2 cores
});
