// The admin runs inside the application process, whose workers renew their leases on the same event loop: a page
// must cost bounded bytes (and so bounded time) whatever producers and handlers put in Redis. Log lines, failure
// reasons and dead-set names and reasons are cut as job data is; a lock page lists the newest rejected duplicates of
// its digest with how many there are; a lock of thousands of holders shows 20 of them and "+N more" (the admin's
// pages, its JSON API, the inspector and the CLI). Sizes are asserted, not timings (flaky on a loaded machine).
import { describe, expect, it, jest } from '@jest/globals';
import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import { LockInspector, RedisIdempotencyStore } from '../../lib/index.js';
import { runCli, runCliJson } from '../cli/run-cli.js';
import type { Redis } from 'ioredis';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { http, OPS, useAdminApp } from './admin-app.js';

jest.setTimeout(120_000);

const KB = 1024;

/** What the tests read of `api/locks/:digest` (typed here: the fields asserted, whatever the library's types). */
interface LockAnswer {
  locks: { owners: { jobId: string }[]; moreOwners?: number }[];
  jobs: { id: string; failedReason?: string; logs: string[] }[];
  moreOwners?: number;
  rejected: { id: string; rejectedAt: number }[];
  rejectedTotal?: number;
}

/** `count` holders `holder-0…` of a general-path enqueue lock of `digest` (as `lockLimit` > 1 admits). */
async function manyHolders(redis: Redis, key: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 1000) {
    const args: (string | number)[] = [];
    for (let j = i; j < Math.min(count, i + 1000); j++) args.push(Date.now() + j, `holder-${j}`);
    await redis.zadd(key, ...args);
  }
}

const occurrences = (text: string, part: string) => text.split(part).length - 1;

describe('admin: a page costs bounded bytes whatever the data', () => {
  const { redis, start } = useAdminApp();

  async function lockedApp() {
    const queueName = uniqueName('adb');
    const app = await start({
      queues: [
        {
          queue: queueName,
          paused: true,
          unique: { lock: 'until_executed', onConflict: 'reject', lockArgs: (data: { id: string }) => data.id },
        },
      ],
    });
    const queue: Queue = app.queue(queueName);
    const result = await app.service.enqueue(queue, 'job', { id: 'x' });
    if (result.status !== 'enqueued' || result.digest === undefined) throw new Error('the holder was not enqueued');
    return { app, queue, queueName, digest: result.digest, job: result.job };
  }

  const page = (url: string) => http(url, { headers: { authorization: OPS, accept: 'text/html' } });
  const api = async (url: string) => {
    const answer = await http(url, { headers: { authorization: OPS, accept: 'application/json' } });
    return { status: answer.status, json: answer.json as LockAnswer };
  };

  it('cuts the log lines, failure reason and history of an owner job; the JSON API has them whole', async () => {
    const { app, queueName, digest, job } = await lockedApp();
    for (let i = 0; i < 50; i++) await job.log(`line ${i} ${'L'.repeat(40 * KB)}`);
    const jobKey = `${bullPrefix()}:${queueName}:${job.id}`;
    const reason = `boom ${'F'.repeat(300 * KB)}`;
    // A failed job (as BullMQ leaves one): its reason is shown twice, in its fields and in its history.
    await redis.hset(jobKey, 'failedReason', reason, 'finishedOn', Date.now());
    await redis.zadd(`${bullPrefix()}:${queueName}:failed`, Date.now(), job.id!);

    const answer = await page(`${app.adminUrl}/locks/${digest}`);
    expect(answer.status).toBe(200);
    // Whole: 50 × 40 KB of log and 2 × 300 KB of reason, ~2.6 MB.
    expect(Buffer.byteLength(answer.text)).toBeLessThan(200 * KB);
    expect(answer.text).toContain('line 49 LLL');
    expect(answer.text).toContain('boom FFF');
    expect(answer.text).toContain('cut at 2000 characters; the JSON API returns it whole');
    expect(answer.text).toMatch(/older lines? left out/);
    expect(answer.text).toContain('the JSON API returns the log whole');

    const whole = await api(`${app.adminUrl}/api/locks/${digest}`);
    expect(whole.status).toBe(200);
    expect(whole.json.jobs[0].failedReason).toBe(reason);
    expect(whole.json.jobs[0].logs).toHaveLength(50);
    expect(whole.json.jobs[0].logs[49]).toBe(`line 49 ${'L'.repeat(40 * KB)}`);
  });

  it('cuts the job name and reason of a dead-set entry on the page', async () => {
    const { app, queueName, digest } = await lockedApp();
    const jobName = `name-${'N'.repeat(300 * KB)}`;
    const reason = `why-${'R'.repeat(300 * KB)}`;
    await app.service.deadSet.add({
      queue: queueName,
      bullPrefix: bullPrefix(),
      jobName,
      data: { id: 'x' },
      opts: {},
      digest,
      existingJobId: '1',
      side: 'client',
      reason,
    });
    for (const url of [`${app.adminUrl}/dead`, `${app.adminUrl}/locks/${digest}`]) {
      const answer = await page(url);
      expect(answer.status).toBe(200);
      expect(Buffer.byteLength(answer.text)).toBeLessThan(100 * KB); // whole: 600 KB
      expect(answer.text).toContain('name-NNN');
      expect(answer.text).toContain('why-RRR');
      expect(answer.text).toContain('cut at 200 characters');
    }
    const entries = (await http(`${app.adminUrl}/api/dead`, { headers: { authorization: OPS } })).json as {
      entries: { jobName: string; reason: string }[];
    };
    expect(entries.entries[0]).toMatchObject({ jobName, reason });
  });

  it('lists the newest 20 rejected duplicates of a lock, with how many there are; the JSON API takes a limit', async () => {
    const { app, queue, digest } = await lockedApp();
    for (let i = 0; i < 60; i++) {
      const result = await app.service.enqueue(queue, 'job', { id: 'x', pad: 'D'.repeat(4 * KB), i });
      expect(result.status).toBe('duplicate');
    }
    const answer = await page(`${app.adminUrl}/locks/${digest}`);
    expect(answer.status).toBe(200);
    expect(occurrences(answer.text, 'data-entry=')).toBe(20);
    expect(answer.text).toContain('The newest 20 of 60 rejected duplicates of this digest');
    expect(answer.text).toMatch(/href="[^"]*\/dead"[^>]*>All rejected duplicates</);
    expect(answer.text).toContain('&quot;i&quot;: 59'); // newest first
    expect(answer.text).not.toContain('&quot;i&quot;: 39');

    const listed = await api(`${app.adminUrl}/api/locks/${digest}`);
    expect(listed.json.rejected).toHaveLength(20);
    expect(listed.json.rejectedTotal).toBe(60);
    const five = await api(`${app.adminUrl}/api/locks/${digest}?limit=5`);
    expect(five.json.rejected.map((entry) => entry.id)).toEqual(listed.json.rejected.slice(0, 5).map((e) => e.id));
    expect((await api(`${app.adminUrl}/api/locks/${digest}?limit=101`)).status).toBe(400);
    expect((await api(`${app.adminUrl}/api/locks/${digest}?limit=100`)).json.rejected).toHaveLength(60);
  });

  it('shows 20 holders of a lock of thousands and "+N more": pages, JSON API, inspector and CLI', async () => {
    const { app, queueName } = await lockedApp();
    const digest = `v1:${createHash('sha256').update(uniqueName('many')).digest('hex')}`;
    const key = `${app.prefix}:{${digest}}:queued`;
    await manyHolders(redis, key, 5000);

    const lockPage = await page(`${app.adminUrl}/locks/${digest}`);
    expect(lockPage.status).toBe(200);
    expect(Buffer.byteLength(lockPage.text)).toBeLessThan(300 * KB); // whole: ~3 MB
    expect(occurrences(lockPage.text, 'class="job-id"')).toBe(20);
    expect(occurrences(lockPage.text, 'class="card job"')).toBe(20);
    expect(lockPage.text).toContain('+4980 more');

    const listPage = await page(`${app.adminUrl}/?digest=${digest}`);
    expect(Buffer.byteLength(listPage.text)).toBeLessThan(100 * KB);
    expect(occurrences(listPage.text, 'class="job-id"')).toBe(20);
    expect(listPage.text).toContain('+4980 more');
    // A holder past the 20 read is still found by a job-id filter, and shown.
    const byHolder = await page(`${app.adminUrl}/?jobId=holder-4500`);
    expect(byHolder.text).toContain(`data-digest="${digest}"`);
    expect(byHolder.text).toContain('holder-4500');

    const detail = await api(`${app.adminUrl}/api/locks/${digest}`);
    expect(detail.json.locks[0].owners).toHaveLength(20);
    expect(detail.json.locks[0].moreOwners).toBe(4980);
    expect(detail.json.jobs).toHaveLength(20);
    expect(detail.json.moreOwners).toBe(4980);

    const inspector = new LockInspector({
      client: redis,
      prefix: app.prefix,
      queues: [{ name: queueName, prefix: bullPrefix() }],
    });
    const [shown] = await inspector.showLock(digest);
    expect(shown.owners.map((owner) => owner.jobId)).toEqual(Array.from({ length: 20 }, (_, i) => `holder-${i}`));
    expect((shown as { moreOwners?: number }).moreOwners).toBe(4980);

    const show = await runCli(['locks', 'show', digest, '--prefix', app.prefix]);
    expect(show.code).toBe(0);
    expect(occurrences(show.stdout, '  owner  job ')).toBe(20);
    expect(show.stdout).toContain('+4980 more owners');
    const list = await runCli(['locks', 'list', digest, '--prefix', app.prefix]);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('holder-0 +4999 more');
    const json = await runCliJson<{ locks: { owners: unknown[]; moreOwners?: number }[] }>([
      'locks',
      'list',
      digest,
      '--prefix',
      app.prefix,
    ]);
    expect(json.json.locks[0].owners).toHaveLength(20);
    expect(json.json.locks[0].moreOwners).toBe(4980);
  });

  // Found by a hostile review (session wt-3): the idempotency key page showed the record's job id whole, where every
  // other page cuts ids at 200 characters (a producer's custom job id may be of any length).
  it("cuts an idempotency record's job id on the key page; the JSON API has it whole", async () => {
    const app = await start({ queues: [{ queue: uniqueName('adk') }] });
    const jobId = `order-${'x'.repeat(300 * KB)}`;
    const store = new RedisIdempotencyStore({ client: redis, prefix: app.prefix });
    await store.claim({
      scope: 'payments:settle',
      key: 'evt_1',
      owner: 'owner-1',
      leaseMs: 60_000,
      fingerprint: undefined,
      jobId,
    });
    const query = 'scope=payments%3Asettle&key=evt_1';
    const html = await page(`${app.adminUrl}/keys?${query}`);
    expect(html.status).toBe(200);
    expect(html.text).toContain('in_progress');
    expect(html.text.length).toBeLessThan(30 * KB);
    expect(html.text).toContain(`order-${'x'.repeat(100)}`);
    const whole = await api(`${app.adminUrl}/api/keys?${query}`);
    expect((whole.json as unknown as { record: { jobId: string } }).record.jobId).toBe(jobId);
  });
});
