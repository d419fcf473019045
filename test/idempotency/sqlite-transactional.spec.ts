// @IdempotencyKey with the SQLite store in transactional mode, end to end through the module and BullMQ: the sample
// app's default. The handler writes through idempotencyOf(job).transaction; its write and the completed record commit
// together, a failed attempt leaves neither, and a later delivery replays without writing.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  idempotencyOf,
  SqliteIdempotencyStore,
  type IdempotencyJob,
  type SqliteDatabaseLike,
} from '../../lib/index.js';
import { useApps } from '../support/apps.js';

interface Settle {
  eventId: string;
  amount: number;
  failFirst?: boolean;
}

describe('@IdempotencyKey with the SQLite store, transactional', () => {
  const directory = mkdtempSync(join(tmpdir(), 'idem-sqlite-e2e-'));
  const database = new Database(join(directory, 'app.db'), { timeout: 5_000 });
  database.pragma('journal_mode = WAL');
  const store = new SqliteIdempotencyStore({ database });
  const settledRows = () =>
    database.prepare('SELECT event_id AS eventId, amount FROM settlements ORDER BY id').all() as Settle[];
  const apps = useApps('idem-sqlite', {
    module: { idempotency: { stores: { sqlite: store } } },
    idempotency: {
      key: (job: IdempotencyJob<Settle>) => job.data.eventId,
      fingerprint: ['eventId', 'amount'],
      store: 'sqlite',
      transactional: true,
    },
    worker: { concurrency: 4 },
    handler: async (job) => {
      const data = job.data as Settle;
      const tx = idempotencyOf<SqliteDatabaseLike>(job).transaction!;
      const { lastInsertRowid } = tx
        .prepare('INSERT INTO settlements (event_id, amount) VALUES (?, ?)')
        .run(data.eventId, data.amount) as unknown as { lastInsertRowid: number | bigint };
      if (data.failFirst && job.attemptsMade === 0) throw new Error('provider timeout');
      return { settlementId: Number(lastInsertRowid) };
    },
  });

  beforeAll(async () => {
    await store.migrate();
    database.exec('CREATE TABLE settlements (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, amount INTEGER NOT NULL)');
  });
  afterAll(() => {
    database.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it('settles once however often the event is delivered, and replays the settlement to every delivery', async () => {
    const app = await apps.start();
    const jobs = await app.queue.addBulk(
      Array.from({ length: 12 }, (_, i) => ({ name: 'settle', data: { eventId: `evt_${i % 3}`, amount: 100 } })),
    );
    const results = (await Promise.all(jobs.map((job) => app.finished(job)))) as { settlementId: number }[];
    const rows = settledRows();
    expect(rows.map((row) => row.eventId).sort()).toEqual(['evt_0', 'evt_1', 'evt_2']);
    // Each delivery got the settlement of its event (one per event), whether it ran or replayed.
    jobs.forEach((_job, i) => {
      const ids = database.prepare('SELECT id FROM settlements WHERE event_id = ?').all(`evt_${i % 3}`) as {
        id: number;
      }[];
      expect(ids).toHaveLength(1);
      expect(results[i]).toEqual({ settlementId: ids[0].id });
    });
    expect(await store.get(`${app.queue.name}:settle`, 'evt_0')).toMatchObject({ state: 'completed', attempts: 1 });
  });

  it('rolls back the write of a failed attempt: the retry settles once', async () => {
    const app = await apps.start();
    const job = await app.queue.add('settle', { eventId: 'evt_retry', amount: 7, failFirst: true }, { attempts: 2 });
    const result = (await app.finished(job)) as { settlementId: number };
    const rows = database.prepare('SELECT id FROM settlements WHERE event_id = ?').all('evt_retry') as { id: number }[];
    expect(rows).toEqual([{ id: result.settlementId }]);
    expect(app.runs).toHaveLength(2);
  });
});
