// Prometheus metrics against a real prom-client Registry: after real jobs (duplicates, a rejection, a run-time lock
// wait, idempotency replays, a reaped orphan), the scrape text holds the expected series with the expected values;
// the gauges read Redis on scrape.
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { InvalidUniqueJobOptionsError, UniqueJobsMetricsModule, UniqueJobsReaper } from '../../lib/index.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { byId, dedupKey, digestOf } from '../support/locks.js';
import { asTestApp, startOwnRedis, useObservedApps } from './helpers.js';
import { Redis } from 'ioredis';

/** A scrape as `name{label="value",…}` (labels sorted) → value. */
function parseScrape(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) continue;
    const labels = [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)]
      .map(([, name, value]) => `${name}="${value}"`)
      .sort();
    series.set(`${match[1]}{${labels.join(',')}}`, Number(match[3]));
  }
  return series;
}

/** The series key for a metric and labels (as {@link parseScrape} writes it). */
function key(name: string, labels: Record<string, string> = {}): string {
  const list = Object.entries(labels)
    .map(([label, value]) => `${label}="${value}"`)
    .sort();
  return `${name}{${list.join(',')}}`;
}

describe('UniqueJobsMetricsModule', () => {
  const { redis, start, stop } = useObservedApps('metrics');

  it('counts locks, duplicates by strategy, rejections, idempotency outcomes and reaped keys, with wait and hold histograms and Redis gauges', async () => {
    const registry = new Registry();
    const gates = new Gates();
    const app = await start({
      imports: [UniqueJobsMetricsModule.forRoot({ registry, heldLocks: { cacheMs: 0 } })],
      module: { reaper: { interval: false, grace: 1 } },
      unique: [
        { lock: 'until_executed', jobName: 'pay', lockArgs: byId },
        { lock: 'until_executed', jobName: 'dupe', lockArgs: byId, onConflict: 'reject' },
        { lock: 'while_executing', jobName: 'sync', lockArgs: byId, lockTimeout: 20_000 },
      ],
      idempotency: { jobName: 'charge', key: (job) => (job.data as { key: string }).key },
      handler: gates.handler,
      worker: { concurrency: 4 },
    });
    const log = new EventLog(asTestApp(app));
    const queue = app.queue.name;
    const scrape = async () => parseScrape(await registry.metrics());

    // pay: a lock, a duplicate the log strategy drops; dupe: a lock, a duplicate the reject strategy keeps.
    gates.hold('p', 'd', 's');
    const pay = await app.queue.add('pay', { id: 'p', tag: 'p' });
    await app.queue.add('pay', { id: 'p', tag: 'p' });
    const dupe = await app.queue.add('dupe', { id: 'd', tag: 'd' });
    await app.queue.add('dupe', { id: 'd', tag: 'd' });
    // sync: the second job waits for the first one's run-time lock.
    const sync1 = await app.queue.add('sync', { id: 's', tag: 's' });
    await gates.started('s');
    const sync2 = await app.queue.add('sync', { id: 's', tag: 's' });
    await gates.started('p');

    let series = await scrape();
    expect(series.get(key('unique_jobs_held_locks', { lock: 'enqueue' }))).toBe(2); // pay and dupe
    expect(series.get(key('unique_jobs_held_locks', { lock: 'runtime' }))).toBe(1); // sync 1
    expect(series.get(key('unique_jobs_held_locks_scan_complete'))).toBe(1);
    expect(series.get(key('unique_jobs_dead_set_size'))).toBe(1);

    gates.releaseAll();
    for (const job of [pay, dupe, sync1, sync2]) await app.finished(job);
    for (const job of [pay, dupe]) await log.next((e) => e.type === 'unlocked' && e.jobId === job.id);
    await log.next((e) => e.type === 'unlocked' && e.jobId === sync2.id);

    // charge: claimed and completed once, then replayed.
    const charge1 = await app.queue.add('charge', { key: 'k-1', tag: 'c' });
    expect(await app.finished(charge1)).toBe('ran:c');
    // The completion is sent on the worker's connection ahead of BullMQ's record of the job, but reported when its
    // answer is read, which may come after QueueEvents said the job completed.
    await log.next((e) => e.type === 'idempotencyCompleted' && e.jobId === charge1.id);
    const charge2 = await app.queue.add('charge', { key: 'k-1', tag: 'c' });
    expect(await app.finished(charge2)).toBe('ran:c');

    // An orphaned deduplication key (its job is gone): the reaper releases it.
    const orphan = dedupKey(queue, digestOf(asTestApp(app), 'pay', { id: 'orphan' }));
    await redis.set(orphan, 'no-such-job');
    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    expect(report.items.map((item) => item.key)).toContain(orphan);

    series = await scrape();
    const job = (name: string) => ({ queue, job_name: name });
    expect(series.get(key('unique_jobs_locks_acquired_total', { ...job('pay'), lock: 'enqueue' }))).toBe(1);
    expect(series.get(key('unique_jobs_locks_acquired_total', { ...job('dupe'), lock: 'enqueue' }))).toBe(1);
    expect(series.get(key('unique_jobs_locks_acquired_total', { ...job('sync'), lock: 'runtime' }))).toBe(2);
    expect(series.get(key('unique_jobs_locks_released_total', { ...job('pay'), lock: 'enqueue' }))).toBe(1);
    expect(series.get(key('unique_jobs_locks_released_total', { ...job('dupe'), lock: 'enqueue' }))).toBe(1);
    expect(series.get(key('unique_jobs_locks_released_total', { ...job('sync'), lock: 'runtime' }))).toBe(2);
    expect(series.get(key('unique_jobs_duplicates_total', { ...job('pay'), side: 'client', strategy: 'log' }))).toBe(1);
    expect(
      series.get(key('unique_jobs_duplicates_total', { ...job('dupe'), side: 'client', strategy: 'reject' })),
    ).toBe(1);
    expect(series.get(key('unique_jobs_idempotency_total', { ...job('charge'), outcome: 'claimed' }))).toBe(1);
    expect(series.get(key('unique_jobs_idempotency_total', { ...job('charge'), outcome: 'completed' }))).toBe(1);
    expect(series.get(key('unique_jobs_idempotency_total', { ...job('charge'), outcome: 'replayed' }))).toBe(1);
    expect(series.get(key('unique_jobs_reaped_total', { kind: 'deduplicationKey' }))).toBe(1);
    expect(series.get(key('unique_jobs_lock_wait_seconds_count', job('sync')))).toBe(2);
    expect(series.get(key('unique_jobs_lock_hold_seconds_count', { ...job('sync'), lock: 'runtime' }))).toBe(2);
    expect(series.get(key('unique_jobs_lock_hold_seconds_count', { ...job('pay'), lock: 'enqueue' }))).toBe(1);
    // The second sync job waited for the first one: its wait is in a bucket above the smallest one.
    expect(series.get(key('unique_jobs_lock_wait_seconds_bucket', { ...job('sync'), le: '+Inf' }))).toBe(2);
    expect(series.get(key('unique_jobs_held_locks', { lock: 'enqueue' }))).toBe(0);
    expect(series.get(key('unique_jobs_held_locks', { lock: 'runtime' }))).toBe(0);
    expect(series.get(key('unique_jobs_dead_set_size'))).toBe(1);
    for (const name of ['unique_jobs_lock_lost_total', 'unique_jobs_errors_total']) {
      expect([...series.keys()].filter((series) => series.startsWith(`${name}{`))).toEqual([]);
    }
  });

  it('unregisters its metrics when the application closes, so the next one registers them again', async () => {
    const registry = new Registry();
    for (const round of [1, 2]) {
      const app = await start({
        imports: [UniqueJobsMetricsModule.forRoot({ registry, prefix: 'app_uj_', heldLocks: false })],
        unique: { lock: 'until_executed', lockArgs: byId },
      });
      const log = new EventLog(asTestApp(app));
      const job = await app.queue.add('pay', { id: `r${round}` });
      await app.finished(job);
      await log.next((e) => e.type === 'unlocked');
      const series = parseScrape(await registry.metrics());
      expect(
        series.get(key('app_uj_locks_acquired_total', { queue: app.queue.name, job_name: 'pay', lock: 'enqueue' })),
      ).toBe(1);
      expect([...series.keys()].some((name) => name.startsWith('app_uj_held_locks'))).toBe(false);
      await stop(app);
      expect(registry.getMetricsAsArray()).toEqual([]);
    }
  });

  // Found by a hostile review (session wt-3): the gauges read Redis with no deadline. With the lock connection's
  // `maxRetriesPerRequest: null` (what BullMQ asks of its connections, and the module takes BullModule.forRoot's by
  // default), a scrape while Redis was down never ended: prom-client waits for every collect, so the whole /metrics
  // endpoint, the application's own metrics with it, went dark instead of the gauges having no value.
  it('a scrape while Redis does not answer ends within seconds: the gauges have no value, the counters are there', async () => {
    const own = await startOwnRedis();
    const connection = new Redis({ host: '127.0.0.1', port: own.port, maxRetriesPerRequest: null });
    connection.on('error', () => undefined);
    try {
      const registry = new Registry();
      const app = await start({
        imports: [UniqueJobsMetricsModule.forRoot({ registry, heldLocks: { cacheMs: 0 } })],
        module: { connection, reaper: { interval: false } },
        unique: { lock: 'until_executed', lockArgs: byId },
      });
      let series = parseScrape(await registry.metrics());
      expect(series.get(key('unique_jobs_dead_set_size'))).toBe(0);
      expect(series.get(key('unique_jobs_held_locks', { lock: 'enqueue' }))).toBe(0);

      await own.stop();
      const started = Date.now();
      const text = await Promise.race([
        registry.metrics(),
        new Promise<string>((resolve) => setTimeout(() => resolve('still waiting after 10 s'), 10_000)),
      ]);
      expect(text).not.toBe('still waiting after 10 s');
      expect(Date.now() - started).toBeLessThan(5_000);
      series = parseScrape(text);
      for (const name of [
        'unique_jobs_dead_set_size',
        'unique_jobs_held_locks',
        'unique_jobs_held_locks_scan_complete',
      ]) {
        expect([name, [...series.keys()].some((series) => series.startsWith(`${name}{`))]).toEqual([name, false]);
      }
      expect(text).toContain('# TYPE unique_jobs_locks_acquired_total counter');
      connection.disconnect(); // what the scrape left waiting fails now, before the app closes
      await stop(app);
    } finally {
      connection.disconnect();
      await own.stop();
    }
  });

  it('refuses invalid held-locks bounds at bootstrap, naming the option; maxScans may be Infinity', () => {
    for (const [heldLocks, option] of [
      [{ maxScans: 0 }, 'heldLocks.maxScans'],
      [{ maxScans: Number.NaN }, 'heldLocks.maxScans'],
      [{ maxScans: 2.5 }, 'heldLocks.maxScans'],
      [{ scanCount: -1 }, 'heldLocks.scanCount'],
      [{ cacheMs: Infinity }, 'heldLocks.cacheMs'],
      [{ cacheMs: -5 }, 'heldLocks.cacheMs'],
    ] as const) {
      const mount = () => UniqueJobsMetricsModule.forRoot({ heldLocks });
      expect(mount).toThrow(InvalidUniqueJobOptionsError);
      expect(mount).toThrow(`"${option}"`);
    }
    expect(
      UniqueJobsMetricsModule.forRoot({ heldLocks: { maxScans: Infinity, scanCount: 10, cacheMs: 0 } }),
    ).toMatchObject({ module: UniqueJobsMetricsModule });
  });
});
