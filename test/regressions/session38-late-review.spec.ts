// Late review of session 38's commits. L1: a cursor (pg-cursor, pg-query-stream) sent on a transactional handler's
// client holds that connection until it is read to its end or closed: `pg` sends nothing else meanwhile, so the store's
// COMMIT waits behind it, and its reads, even after the handler returned, still run inside the claim's transaction (a
// cursor done answers its reads without the connection). 8aeb2e9 refused those reads once the handler had returned: a
// cursor read on after the return (a promise chain not awaited) was refused, never finished, and the COMMIT waited for
// it forever (the job never ended, its connection held; a pg-query-stream was destroyed instead, its rows lost). Shown
// with pg-cursor 2.22 on the store's transaction; the cursor below speaks its protocol (not a dependency here). L2: a bulk whose entry
// without a unique definition adds a caller's jobId, followed by a unique entry with that id (answered by that job, no
// lock taken), reported a `locked` event for it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type pg from 'pg';
import { idempotencyOf, PostgresIdempotencyStore, type IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { byId } from '../support/locks.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

interface Data {
  key: string;
}

/** The part of pg's connection a cursor talks to (pg-cursor's calls). */
interface CursorConnection {
  parse(query: { text: string }, more: boolean): void;
  bind(config: { portal: string; values: unknown[] }, more: boolean): void;
  describe(msg: { type: string; name: string }, more: boolean): void;
  execute(msg: { portal: string; rows: number }, more: boolean): void;
  close(msg: { type: string; name: string }): void;
  flush(): void;
  sync(): void;
}

let portals = 0;

/**
 * A cursor as pg-cursor is one: a Submittable that opens a named portal on submit and reads from it on the connection
 * itself (`execute` of `rows`, no Sync), so that pg's client, which goes on to its next query only at ReadyForQuery,
 * waits for it until it is read to its end or closed. Rows come back as their text values.
 */
class PortalCursor {
  state: 'initialized' | 'idle' | 'busy' | 'done' | 'error' = 'initialized';
  private connection: CursorConnection | undefined;
  private readonly portal = `C_s38_${++portals}`;
  private rows: unknown[] = [];
  private pending: { rows: number; callback: (error: Error | null, rows?: unknown[]) => void }[] = [];
  private reading: ((error: Error | null, rows?: unknown[]) => void) | undefined;

  constructor(readonly text: string) {}

  submit(connection: CursorConnection): void {
    this.connection = connection;
    connection.parse({ text: this.text }, true);
    connection.bind({ portal: this.portal, values: [] }, true);
    connection.describe({ type: 'P', name: this.portal }, true);
    connection.flush();
  }

  handleRowDescription(): void {
    this.state = 'idle';
    this.next();
  }

  handleDataRow(msg: { fields: unknown[] }): void {
    this.rows.push(msg.fields[0]);
  }

  handlePortalSuspended(): void {
    this.answer();
  }

  handleCommandComplete(): void {
    this.closePortal();
  }

  handleReadyForQuery(): void {
    this.answer();
    this.state = 'done';
  }

  handleEmptyQuery(): void {
    this.connection!.sync();
  }

  handleError(error: Error): void {
    if (this.state === 'done') return;
    if (this.state !== 'initialized') this.connection!.sync();
    this.state = 'error';
    this.reading?.(error);
    for (const { callback } of this.pending.splice(0)) callback(error);
  }

  read(rows: number): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      const callback = (error: Error | null, got?: unknown[]) => (error ? reject(error) : resolve(got!));
      if (this.state === 'done') return void setImmediate(() => callback(null, []));
      if (this.state === 'error') return void setImmediate(() => callback(new Error('cursor failed')));
      this.pending.push({ rows, callback });
      if (this.state === 'idle') this.next();
    });
  }

  close(): Promise<void> {
    if (this.state === 'done' || !this.connection) return Promise.resolve();
    this.closePortal();
    return new Promise((resolve) => (this.connection as unknown as NodeJS.EventEmitter).once('readyForQuery', resolve));
  }

  private next(): void {
    const read = this.pending.shift();
    if (!read) return;
    this.state = 'busy';
    this.reading = read.callback;
    this.rows = [];
    this.connection!.execute({ portal: this.portal, rows: read.rows }, true);
    this.connection!.flush();
  }

  private answer(): void {
    if (this.state !== 'done') this.state = 'idle';
    const reading = this.reading;
    const rows = this.rows;
    this.reading = undefined;
    this.rows = [];
    setImmediate(() => {
      reading?.(null, rows);
      if (this.state === 'idle') this.next();
    });
  }

  private closePortal(): void {
    if (this.state === 'done') return;
    this.connection!.close({ type: 'P', name: this.portal });
    if (this.state !== 'error') this.connection!.sync();
    this.state = 'done';
  }
}

describe('L1 a cursor read on after a transactional handler returned', () => {
  const { start } = useApps('s38l-cursor');
  let pool: pg.Pool;
  const tables: string[] = [];
  beforeAll(() => {
    pool = pgPool(2);
  });
  afterAll(async () => {
    for (const table of tables) await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  it('still reads inside the claim transaction (the COMMIT waits for it), and the job completes', async () => {
    const idem = uniqueTable('idem_s38l_cursor');
    tables.push(idem);
    const store = new PostgresIdempotencyStore({ pool, table: idem });
    await store.migrate();
    const lateRows = deferred<unknown>();
    const app = await start({
      module: { idempotency: { stores: { sql: store } } },
      idempotency: { key: (job: IdempotencyJob<Data>) => job.data.key, store: 'sql', transactional: true },
      handler: async (job: Job) => {
        const client = idempotencyOf<pg.PoolClient>(job).transaction!;
        const cursor = client.query(
          new PortalCursor('SELECT txid_current()::text AS t FROM generate_series(1, 5)') as never,
        ) as unknown as PortalCursor;
        const [txid] = await cursor.read(1);
        // Read on once the handler returned (not awaited): its COMMIT is sent behind the cursor, so waits for it.
        void (async () => {
          await new Promise((resolve) => setTimeout(resolve, 200));
          const rows: unknown[] = [txid];
          for (let got = await cursor.read(2); got.length > 0; got = await cursor.read(2)) rows.push(...got);
          return rows;
        })().then(lateRows.resolve, lateRows.resolve);
        // No result: the claim's record is its completion, the store sends no statement after the handler but COMMIT.
        return undefined;
      },
    });
    const job = await app.queue.add('charge', { key: 'k-cursor' });
    const outcome = await Promise.race([
      app.finished(job),
      new Promise((resolve) => setTimeout(() => resolve('still running after 5 s'), 5_000)),
    ]);
    const rows = await Promise.race([lateRows.promise, Promise.resolve('no answer')]);
    expect({ outcome, rows }).toEqual({ outcome: null, rows: expect.any(Array) });
    // Every row read in the claim's transaction (one transaction id), the last ones after the handler returned.
    expect(new Set(rows as unknown[]).size).toBe(1);
    expect(rows).toHaveLength(5);
  }, 15_000);
});

describe('L2 a bulk entry answered by a job an earlier plain entry of the bulk added', () => {
  const { start } = useApps('s38l-bulk');

  it.each([
    ['fast path', 1],
    ['slot set (lockLimit 2)', 2],
  ])('%s: reports no locked event for it', async (_, lockLimit) => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, jobName: 'sync', lockLimit },
      paused: true,
    });
    const log = new EventLog(app);
    const added = await app.queue.addBulk([
      { name: 'plain', data: { id: 'p' }, opts: { jobId: 'job-1' } },
      { name: 'sync', data: { id: 'a' }, opts: { jobId: 'job-1' } },
      { name: 'sync', data: { id: 'b' }, opts: { jobId: 'job-2' } },
    ]);
    expect(added.map((job) => job.id)).toEqual(['job-1', 'job-1', 'job-2']);
    expect((await app.queue.getJob('job-1'))?.name).toBe('plain'); // the unique entry added nothing
    expect(log.of('locked').map(({ jobId }) => jobId)).toEqual(['job-2']);
  });
});
