// Review helper rv52 of session 52's settleStaleHandover: paths the review checked and found sound, kept as tests.
// Transactional mode (the claim inside the handler's transaction on PostgreSQL; a claim then a transaction on SQLite),
// `onInProgress: 'fail'` (the delivery that settled the record is delayed and tried again, not failed), and several
// duplicates meeting one stale record at once on a worker of concurrency 3 (one releases it, one runs, the others
// replay its result).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { parkThenRemove, parkingOptions } from '../support/parking-app.js';
import { EventLog } from '../support/events.js';
import { stepStore, type StepStore } from '../support/step-stores.js';

describe.each(['sqlite', 'postgres'] as const)('rv52: a stale parked record (%s store)', (kind) => {
  const { start } = useApps(`rv52s-${kind}`);
  let sql: StepStore;
  beforeAll(async () => {
    sql = await stepStore(kind);
  });
  afterAll(async () => sql.close());

  async function parkingApp(ran: string[], extra: object, worker: object = {}): Promise<TestApp> {
    return start({ ...parkingOptions(sql, ran, { idempotency: extra }), worker });
  }

  it.each([
    ['transactional', { transactional: true }],
    ["onInProgress: 'fail'", { onInProgress: 'fail' }],
  ])(
    '%s: a duplicate releases the record of a removed job and runs',
    async (_, extra) => {
      const ran: string[] = [];
      const app = await parkingApp(ran, extra);
      const first = await parkThenRemove(app, 'k');
      const duplicate = await app.queue.add('charge', { key: 'k' });
      await expect(app.finished(duplicate)).resolves.toBe('fresh');
      expect(ran).toEqual([`${first}:1`, `${duplicate.id}:fresh`]);
    },
    30_000,
  );

  it('three duplicates at once (concurrency 3): one release, one run, the others replay', async () => {
    const ran: string[] = [];
    const app = await parkingApp(ran, {}, { concurrency: 3 });
    const first = await parkThenRemove(app, 'k');
    const events = new EventLog(app);
    const duplicates = await app.queue.addBulk([1, 2, 3].map(() => ({ name: 'charge', data: { key: 'k' } })));
    const started = Date.now();
    for (const duplicate of duplicates) await expect(app.finished(duplicate)).resolves.toBe('fresh');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(ran.filter((run) => run.endsWith(':fresh'))).toHaveLength(1);
    expect(events.of('idempotencyReleased').filter((e) => e.jobId === first)).toHaveLength(1);
  }, 30_000);
});
