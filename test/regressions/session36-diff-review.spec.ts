// Review of session 36's diff (review 116). Each case failed before its fix.
import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { Job } from 'bullmq';
import { stepHandler } from '../support/step-handler.js';
import { useApps } from '../support/apps.js';
import { digestOf, owners, runningKey } from '../support/locks.js';
import { deferred } from '../support/deferred.js';
import { EventLog } from '../support/events.js';
import { keysPage } from '../../lib/ops/admin/views/keys.view.js';
import { USAGE } from '../../lib/ops/cli/usage.js';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { pgPool, uniqueTable } from '../support/postgres.js';

type StepData = { id: string; step?: number };

// A step job of a run-time lock computed from its data parks its lock under the digest of the data it stored for the
// next step (3dcb548), by a fresh take of that digest (99bea0a). A job due at once may be delivered again, run its next
// step and complete before that take is sent (the handler still busy after its move, a slow round trip): the take then
// parked a slot for a job that had completed, and a new job of that data ended through `log` without running its
// handler, until the parked lease ended.
describe('session 36 review: a step job whose next delivery completes before the park under its new digest', () => {
  const { redis, start, keysOf } = useApps('s36r-moved-park');

  it('parks nothing for a job already finished; a new job of its data runs', async () => {
    const ran: string[] = [];
    const stepTwoDone = deferred();
    const app = await start({
      unique: { lock: 'while_executing', jobName: 'sync', runtimeLockLease: 120_000, onConflict: 'log' },
      worker: { concurrency: 2 },
      // The next delivery runs and completes before step 1 ends.
      handler: stepHandler(ran, { delayMs: 0, beforeThrow: () => stepTwoDone.promise }),
    });
    const events = new EventLog(app);
    app.worker!.on('completed', (job: Job<StepData>) => {
      if (job.data.step === 2) stepTwoDone.resolve();
    });
    const first = await app.queue.add('sync', { id: 'a' });
    await expect(app.finished(first)).resolves.toBe('done');
    // The first delivery's step ends after the job completed: wait for its park (the `unlocked` of its first slot).
    const released = () =>
      events.of('unlocked').filter((event) => event.lock === 'runtime' && event.jobId === first.id).length;
    await events.next(() => released() === 2);
    const moved = runningKey(app.prefix, digestOf(app, 'sync', { id: 'a', step: 2 }));
    expect(await owners(redis, moved)).toEqual([]);
    expect(await keysOf(app)).toEqual([]);
    const again = await app.queue.add('sync', { id: 'a', step: 2 });
    await expect(app.finished(again)).resolves.toBe('done');
    expect(ran).toContain(`${again.id}:2`);
  }, 30_000);
});

// The default idempotency scope of a queue under a BullMQ prefix of its own is ':<prefix>:<queue>:<job name>' (0faeed3;
// led by ':' since session 42):
// the admin's key lookup and the CLI's usage still said '<queue>:<job name>', so an operator looking up such a key by
// the scope they were told found nothing.
describe('session 36 review: the help texts name the default scope under a BullMQ prefix', () => {
  it('the admin key lookup and the CLI usage say the prefix leads it', () => {
    const context = { base: '/admin', title: 'Unique jobs', nonce: 'n', csrfToken: 't' };
    const page = keysPage(context, ['default'], {}, undefined).toString();
    expect(page).toContain('<code>:&lt;prefix&gt;:&lt;queue&gt;:&lt;job name&gt;</code>');
    expect(USAGE).toContain('":<bull prefix>:queue:name" under a --bull-prefix other than bull');
  });
});

// A SQL store's claim that the upsert refused reads the record that stopped it in a statement of its own. When the
// holder handed the record over to the claimant's own job between the two (a step job's next delivery claiming while
// its step ends), the claim was answered lost to that handover: the job's own delivery waited for a handover made to
// itself, which nobody wakes (it waited a whole lease; CI saw step-jobs time out on PostgreSQL). It claims again now,
// and resumes.
describe('session 36: a SQL claim refused by a record then handed over to its own job', () => {
  const pool = pgPool(2);
  const table = uniqueTable('idem_s36_resume_race');
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  it('claims again and resumes it', async () => {
    await pool.query(PostgresIdempotencyStore.migrationSql(table));
    const holder = new PostgresIdempotencyStore({ pool, table });
    const resumeOwner = `step:${randomUUID()}`;
    const first = { scope: 's', key: 'k', owner: randomUUID(), leaseMs: 60_000, fingerprint: 'f', jobId: '1' };
    await expect(holder.claim({ ...first, resumeOwner })).resolves.toEqual({ claimed: true, takeover: false });
    let handOver: (() => Promise<unknown>) | undefined = () =>
      holder.handOver(first, { owner: resumeOwner, leaseMs: 60_000 });
    // The next delivery's store: the step hands the record over right after its upsert was refused.
    const racing = new Proxy(pool, {
      get(target, property) {
        if (property !== 'query') return Reflect.get(target, property, target) as unknown;
        return async (...args: Parameters<typeof pool.query>) => {
          const result = await (target.query as (...a: unknown[]) => Promise<{ rows: unknown[] }>)(...args);
          const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text;
          if (handOver && /DO UPDATE SET/.test(text) && result.rows.length === 0) {
            const race = handOver;
            handOver = undefined;
            await race();
          }
          return result;
        };
      },
    });
    const next = new PostgresIdempotencyStore({ pool: racing, table });
    const claim = await next.claim({ ...first, owner: randomUUID(), resumeOwner });
    expect(handOver).toBeUndefined(); // the race happened
    expect(claim).toMatchObject({ claimed: true, resumed: true });
  });
});
