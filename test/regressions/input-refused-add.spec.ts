import { describe, expect, it } from '@jest/globals';
import type { JobsOptions } from 'bullmq';
import { useApps } from '../support/apps.js';
import { asEnqueued, byId } from '../support/locks.js';

// Found by a hostile review (session 26): `replace` on a lock held in a slot set (a lockLimit, an until_expired period,
// a lock across queues) removed the waiting holder, then BullMQ refused the new job before sending anything (an option
// it rejects, data it cannot serialize): the call threw and the digest had no job at all. And `queue.add(name, data,
// null)`, which plain BullMQ takes, threw a TypeError on a unique job.
describe('a job BullMQ refuses before Redis', () => {
  const { start } = useApps('refadd');

  const slotSetLocks = [
    ['lockLimit 2', { lock: 'until_executed', lockLimit: 2 }],
    ['until_expired', { lock: 'until_expired', lockTtl: 60_000 }],
    ['a lock across queues', { lock: 'until_executed', uniqueAcross: 'queues' }],
  ] as const;
  const refused: [string, Record<string, unknown>, JobsOptions][] = [
    ['a float priority', { id: 'a', n: 99 }, { priority: 1.5 }],
    ['data JSON cannot hold (a BigInt outside the lock arguments)', { id: 'a', big: 10n }, {}],
    ['data over its sizeLimit', { id: 'a', blob: 'x'.repeat(200) }, { sizeLimit: 100 }],
    ["a custom id '0'", { id: 'a', n: 99 }, { jobId: '0' }],
  ];

  it.each(
    slotSetLocks.flatMap(([lock, unique]) =>
      refused.map(([what, data, opts]) => [lock, what, unique, data, opts] as const),
    ),
  )(
    '%s, replace, %s: BullMQ refuses the add and the waiting holders stay',
    async (_lock, _what, unique, data, opts) => {
      const app = await start({ unique: { ...unique, onConflict: 'replace', lockArgs: byId }, paused: true });
      const limit = 'lockLimit' in unique ? unique.lockLimit : 1;
      const holders: string[] = [];
      for (let i = 0; i < limit; i++)
        holders.push(asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: i })).job.id!);
      await expect(app.queue.add('price', data, opts)).rejects.toThrow();
      const left = (await app.queue.getJobs(['waiting', 'delayed', 'prioritized'])).map((job) => job.id);
      expect(left.sort()).toEqual(holders.sort());
    },
  );

  // Found by a hostile review of the producer side: another refusal is made inside BullMQ's add script, which stores the
  // options as JSON: a NaN or infinite number among them. `replace` removed the waiting holder first, on the fast path
  // and on slot sets alike, and the digest was left with no job at all.
  it.each(
    [['the deduplication key', { lock: 'until_executed' }] as const, ...slotSetLocks].flatMap(([lock, unique]) =>
      (
        [
          ['delay: NaN', { delay: Number.NaN }],
          ['delay: Infinity', { delay: Infinity }],
          ['attempts: Infinity', { attempts: Infinity }],
          ['backoff.delay: NaN', { backoff: { type: 'fixed', delay: Number.NaN } }],
        ] as [string, JobsOptions][]
      ).map(([what, opts]) => [lock, what, unique, opts] as const),
    ),
  )('%s, replace, %s: refused, naming the option, and the waiting holders stay', async (_lock, _what, unique, opts) => {
    const app = await start({ unique: { ...unique, onConflict: 'replace', lockArgs: byId }, paused: true });
    const limit = 'lockLimit' in unique ? unique.lockLimit : 1;
    const holders: string[] = [];
    for (let i = 0; i < limit; i++)
      holders.push(asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: i })).job.id!);
    await expect(app.queue.add('price', { id: 'a', n: 99 }, opts)).rejects.toThrow(/is not a finite number/);
    const left = (await app.queue.getJobs(['waiting', 'delayed', 'prioritized'])).map((job) => job.id);
    expect(left.sort()).toEqual(holders.sort());
  });

  // Review of session 26: one refusal is made inside BullMQ's add script, after a removal: a parent that is missing.
  it.each(slotSetLocks)(
    '%s, replace, a parent that does not exist: refused, the holders stay',
    async (_lock, unique) => {
      const app = await start({ unique: { ...unique, onConflict: 'replace', lockArgs: byId }, paused: true });
      const limit = 'lockLimit' in unique ? unique.lockLimit : 1;
      const holders: string[] = [];
      for (let i = 0; i < limit; i++)
        holders.push(asEnqueued(await app.service.enqueue(app.queue, 'price', { id: 'a', n: i })).job.id!);
      const parent = { id: 'nope', queue: app.queue.qualifiedName };
      await expect(app.queue.add('price', { id: 'a', n: 99 }, { parent })).rejects.toThrow(
        /parent job nope .* does not exist/,
      );
      const left = (await app.queue.getJobs(['waiting', 'delayed', 'prioritized', 'waiting-children'])).map(
        (j) => j.id,
      );
      expect(left.sort()).toEqual(holders.sort());
    },
  );

  it.each([
    ['until_executed', { lock: 'until_executed' }],
    ['lockLimit 2', { lock: 'until_executed', lockLimit: 2 }],
  ] as const)(
    '%s: queue.add(name, data, null) enqueues, then meets the lock, as with no options',
    async (_lock, unique) => {
      const app = await start({ unique: { ...unique, onConflict: 'log', lockArgs: byId }, paused: true });
      const limit = 'lockLimit' in unique ? unique.lockLimit : 1;
      const added: string[] = [];
      for (let i = 0; i <= limit; i++) added.push((await app.queue.add('price', { id: 'a', n: i }, null as never)).id!);
      const [bulk] = await app.queue.addBulk([{ name: 'price', data: { id: 'a' }, opts: null as never }]);
      const waiting = (await app.queue.getJobs(['waiting'])).map((job) => job.id).sort();
      expect(waiting).toEqual(added.slice(0, limit).sort());
      expect(waiting).toContain(added[limit]); // the duplicate's handle names a holder
      expect(waiting).toContain(bulk.id);
    },
  );
});
