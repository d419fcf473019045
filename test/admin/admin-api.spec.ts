import { describe, expect, it } from '@jest/globals';
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Job } from 'bullmq';
import {
  InvalidUniqueJobOptionsError,
  UniqueJobsAdminModule,
  type AdminDeadSetPage,
  type AdminKeyLookup,
  type AdminLockDetail,
  type HeldLock,
  type LockCounts,
  type LockPage,
} from '../../lib/index.js';
import { bullPrefix, uniqueName } from '../support/redis.js';
import { nestedPayload } from '../support/payloads.js';
import { ADMIN_PATH, csrfOf, http, INTRUDER, OPS, OTHER, TestAdminGuard, useAdminApp } from './admin-app.js';

/** A guard that lets everyone in and refreshes a sliding session cookie on each answer, as login middleware does. */
@Injectable()
class SessionRefreshingGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    context.switchToHttp().getResponse<{ cookie(name: string, value: string): void }>().cookie('session', 'refreshed');
    return true;
  }
}

interface Order {
  id: string;
  amount: number;
}

/** A paused queue whose jobs hold an `until_executed` lock on `data.id` and whose duplicates go to the dead set. */
function lockedQueue(queue: string) {
  return {
    queue,
    paused: true,
    unique: { lock: 'until_executed' as const, onConflict: 'reject', lockArgs: (data: Order) => data.id },
  };
}

describe('admin JSON API', () => {
  const { redis, start, current } = useAdminApp();

  /** Starts an app with one locked queue and enqueues `orders`; resolves each order's digest, key and job. */
  async function lockedApp(...orders: Order[]) {
    const queueName = uniqueName('adm');
    const app = await start({ queues: [lockedQueue(queueName)] });
    const queue = app.queue(queueName);
    const locks: { digest: string; key: string; job: Job }[] = [];
    for (const order of orders) {
      const result = await app.service.enqueue(queue, 'charge', order);
      if (result.status !== 'enqueued' || !result.digest) throw new Error(`order ${order.id} was not enqueued`);
      const key = `${bullPrefix()}:${queueName}:de:uj:${result.digest}`;
      expect(await redis.get(key)).toBe(result.job.id);
      locks.push({ digest: result.digest, key, job: result.job });
    }
    return { app, queueName, queue, locks };
  }

  const api = (path: string) => `${current().adminUrl}/api/${path}`;

  function expectSecurityHeaders(headers: Headers): void {
    const csp = headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("form-action 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(headers.get('x-content-type-options')).toBe('nosniff');
  }

  it('sends every route through the guard: 401 without credentials, 403 with refused ones, and a refused POST changes nothing', async () => {
    const { locks } = await lockedApp({ id: 'order-1', amount: 5 });
    const { digest, key, job } = locks[0];
    const csrf = await csrfOf(current());
    const base = current().adminUrl;
    const routes: [string, string][] = [
      ['GET', base],
      ['GET', `${base}/locks/${digest}`],
      ['GET', `${base}/dead`],
      ['GET', `${base}/keys?scope=a&key=b`],
      ['GET', `${base}/api/csrf`],
      ['GET', `${base}/api/counts`],
      ['GET', `${base}/api/locks`],
      ['GET', `${base}/api/locks/${digest}`],
      ['GET', `${base}/api/dead`],
      ['GET', `${base}/api/keys?scope=a&key=b`],
      ['POST', `${base}/api/locks/${digest}/release`],
      ['POST', `${base}/locks/${digest}/release`],
    ];
    for (const [method, url] of routes) {
      // Even with the operator's valid CSRF token and cookie: the guard decides first.
      const headers = { 'x-csrf-token': csrf.token, cookie: csrf.cookie };
      const anonymous = await http(url, { method, headers });
      expect([method, url, anonymous.status]).toEqual([method, url, 401]);
      expect(anonymous.json).toEqual({ statusCode: 401, message: 'Sign in to see the unique-jobs admin' });
      expectSecurityHeaders(anonymous.headers);
      const refused = await http(url, { method, headers: { ...headers, authorization: INTRUDER } });
      expect([method, url, refused.status]).toEqual([method, url, 403]);
      expect(refused.text).not.toContain(digest);
    }
    expect(await redis.get(key)).toBe(job.id);

    const allowed = await http(`${base}/api/counts`, { headers: { authorization: OPS } });
    expect(allowed.status).toBe(200);
    expectSecurityHeaders(allowed.headers);
  });

  it('lists held locks with their owner job, its state, since and TTL; filters; pages with a cursor; counts', async () => {
    const { queueName, locks } = await lockedApp(
      { id: 'order-1', amount: 5 },
      { id: 'order-2', amount: 7 },
      { id: 'order-3', amount: 9 },
    );
    const get = async <T>(path: string) => {
      const answer = await http(api(path), { headers: { authorization: OPS } });
      expect([path, answer.status]).toEqual([path, 200]);
      expect(answer.headers.get('content-type')).toContain('application/json');
      return answer.json as T;
    };

    const all = await get<LockPage>('locks');
    expect(all.cursor).toBe('0');
    const byDigest = new Map(all.locks.map((lock) => [lock.digest, lock]));
    expect([...byDigest.keys()].sort()).toEqual(locks.map((lock) => lock.digest).sort());
    for (const { digest, key, job } of locks) {
      expect(byDigest.get(digest)).toEqual({
        digest,
        kind: 'enqueue',
        storage: 'deduplication',
        key,
        queue: queueName,
        owners: [{ jobId: job.id!, jobState: 'waiting', jobName: 'charge', since: job.timestamp, queue: queueName }],
      } satisfies HeldLock);
    }

    const one = locks[1];
    expect((await get<LockPage>(`locks?digest=${one.digest.slice(0, 20)}`)).locks.map((l) => l.digest)).toEqual([
      one.digest,
    ]);
    expect((await get<LockPage>(`locks?jobId=${encodeURIComponent(one.job.id!)}`)).locks.map((l) => l.digest)).toEqual([
      one.digest,
    ]);
    expect((await get<LockPage>('locks?kind=runtime')).locks).toEqual([]);
    expect((await get<LockPage>(`locks?queue=${queueName}&kind=enqueue`)).locks).toHaveLength(3);

    const paged: string[] = [];
    let cursor = '0';
    let pages = 0;
    do {
      const page = await get<LockPage>(`locks?limit=1${cursor === '0' ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
      expect(page.locks.length).toBeLessThanOrEqual(1);
      paged.push(...page.locks.map((lock) => lock.digest));
      cursor = page.cursor;
      pages++;
    } while (cursor !== '0' && pages < 50);
    expect(paged.sort()).toEqual(locks.map((lock) => lock.digest).sort());

    expect(await get<LockCounts>('counts')).toEqual({ enqueueLocks: 3, runtimeLocks: 0, deadSet: 0, complete: true });

    for (const bad of ['locks?digest=%3Cscript%3E', 'locks?kind=both', 'locks?queue=elsewhere', 'locks?limit=0']) {
      const answer = await http(api(bad), { headers: { authorization: OPS } });
      expect([bad, answer.status]).toEqual([bad, 400]);
    }
    const badCursor = await http(api('locks?cursor=nope'), { headers: { authorization: OPS } });
    expect(badCursor.status).toBe(400);
    expect((badCursor.json as { message: string }).message).toMatch(/Invalid cursor/);
    // Of the cursor's shape, but past SCAN's 64-bit range (Redis would refuse it: "ERR invalid cursor").
    const pastScan = await http(api('locks?cursor=n0.99999999999999999999.0'), { headers: { authorization: OPS } });
    expect([pastScan.status, (pastScan.json as { message: string }).message]).toEqual([
      400,
      expect.stringMatching(/Invalid cursor/),
    ]);
  });

  // JSON.stringify with an indent made the entry below (~100 KB) hundreds of megabytes of text, and stalled the
  // application for seconds, on every view of it.
  it('deeply nested job data: the pages show it cut, the API answers it whole at about its own size', async () => {
    const { queue } = await lockedApp({ id: 'order-1', amount: 5 });
    const payload = nestedPayload(2_000, 20_000);
    const size = JSON.stringify(payload).length;
    const holder = await current().service.enqueue(queue, 'charge', { id: 'order-2', amount: 1, payload });
    await current().service.enqueue(queue, 'charge', { id: 'order-2', amount: 2, payload });
    if (holder.status !== 'enqueued') throw new Error('the holder was not enqueued');
    const auth = { authorization: OPS };
    // The dead set's page carries the rejected duplicate's payload; the lock's, the holder's and the duplicate's.
    for (const [path, copies] of [
      ['dead', 1],
      [`locks/${holder.digest}`, 2],
    ] as const) {
      const page = await http(`${current().adminUrl}/${path}`, { headers: auth });
      expect([path, page.status, page.text]).toEqual([path, 200, expect.stringContaining('Cut at 20000 characters')]);
      expect(page.text.length).toBeLessThan(size);
      const answer = await http(api(path), { headers: auth });
      expect([path, answer.status]).toEqual([path, 200]);
      expect(answer.text.length).toBeLessThan(copies * size + 20_000);
      expect(JSON.stringify(answer.json)).toContain(JSON.stringify(payload));
    }
  });

  it("keeps the cookies the application's guard set on the response beside its CSRF cookie", async () => {
    const app = await start({ queues: [lockedQueue(uniqueName('adm'))], admin: { guard: SessionRefreshingGuard } });
    const page = await http(`${app.adminUrl}/dead`);
    expect(page.status).toBe(200);
    expect(page.headers.getSetCookie().map((cookie) => cookie.split('=')[0])).toEqual(['session', 'ujadmin_csrf']);
  });

  it('opens a lock: its key, its owner job with data, logs and history, and the duplicates rejected under its digest', async () => {
    const { queue, locks } = await lockedApp({ id: 'order-1', amount: 5 });
    const { digest, key, job } = locks[0];
    await job.log('received from the webhook');
    const duplicate = await current().service.enqueue(queue, 'charge', { id: 'order-1', amount: 6 });
    expect(duplicate).toMatchObject({ status: 'duplicate', strategy: 'reject', existingJobId: job.id });

    const answer = await http(api(`locks/${digest}`), { headers: { authorization: OPS } });
    expect(answer.status).toBe(200);
    const detail = answer.json as AdminLockDetail;
    expect(detail.digest).toBe(digest);
    expect(detail.locks.map((lock) => [lock.key, lock.kind])).toEqual([[key, 'enqueue']]);
    expect(detail.jobs).toHaveLength(1);
    expect(detail.jobs[0]).toMatchObject({
      queue: queue.name,
      id: job.id,
      found: true,
      name: 'charge',
      state: 'waiting',
      data: { id: 'order-1', amount: 5 },
      attemptsMade: 0,
      logs: ['received from the webhook'],
    });
    expect(detail.jobs[0].timeline).toEqual([{ at: job.timestamp, event: 'added' }]);
    expect(detail.rejected).toHaveLength(1);
    expect(detail.rejected[0]).toMatchObject({
      queue: queue.name,
      jobName: 'charge',
      data: { id: 'order-1', amount: 6 },
      digest,
      existingJobId: job.id,
      side: 'client',
    });

    const unknown = await http(api(`locks/v1:${'0'.repeat(64)}`), { headers: { authorization: OPS } });
    expect(unknown.status).toBe(404);
    const invalid = await http(api('locks/v1:not-hex'), { headers: { authorization: OPS } });
    expect(invalid.status).toBe(400);
    expect((invalid.json as { message: string }).message).toMatch(/Invalid digest/);
  });

  it('refuses a release without a valid CSRF token, from another origin, for another user or by GET (403/405), leaving the lock', async () => {
    const { queue, locks } = await lockedApp({ id: 'order-1', amount: 5 });
    const { digest, key, job } = locks[0];
    const url = api(`locks/${digest}/release`);
    const mine = await csrfOf(current(), OPS);
    const theirs = await csrfOf(current(), OTHER);
    expect(theirs.cookie).not.toBe(mine.cookie);
    const flipped = `${mine.token.slice(0, -1)}${mine.token.endsWith('A') ? 'B' : 'A'}`;
    const attempts: [string, Record<string, string>][] = [
      ['no token, no cookie', {}],
      ['token without its cookie', { 'x-csrf-token': mine.token }],
      ['cookie without a token', { cookie: mine.cookie }],
      ['a wrong token', { cookie: mine.cookie, 'x-csrf-token': flipped }],
      ['a token from another session', { cookie: theirs.cookie, 'x-csrf-token': mine.token }],
      ["another user's token and cookie", { cookie: theirs.cookie, 'x-csrf-token': theirs.token }],
      ['a foreign Origin', { cookie: mine.cookie, 'x-csrf-token': mine.token, origin: 'http://evil.example' }],
      ['a foreign Referer', { cookie: mine.cookie, 'x-csrf-token': mine.token, referer: 'http://evil.example/x' }],
      ['Origin null', { cookie: mine.cookie, 'x-csrf-token': mine.token, origin: 'null' }],
    ];
    for (const [what, headers] of attempts) {
      const answer = await http(url, { method: 'POST', headers: { authorization: OPS, ...headers } });
      expect([what, answer.status]).toEqual([what, 403]);
      expect(await redis.get(key)).toBe(job.id);
    }
    const formWithoutToken = await http(`${current().adminUrl}/locks/${digest}/release`, {
      method: 'POST',
      headers: { authorization: OPS, cookie: mine.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'kind=enqueue',
    });
    expect(formWithoutToken.status).toBe(403);
    for (const method of ['GET', 'HEAD']) {
      for (const path of [url, `${current().adminUrl}/locks/${digest}/release`]) {
        const answer = await http(path, { method, headers: { authorization: OPS, cookie: mine.cookie } });
        expect([method, path, answer.status]).toEqual([method, path, 405]);
        expect(answer.headers.get('allow')).toBe('POST');
      }
    }
    expect(await redis.get(key)).toBe(job.id);

    const released = await http(url, {
      method: 'POST',
      headers: { authorization: OPS, cookie: mine.cookie, 'x-csrf-token': mine.token, origin: current().origin },
    });
    expect(released.status).toBe(200);
    expect(released.json).toEqual({ digest, released: 1 });
    expect(await redis.exists(key)).toBe(0);
    // The lock is free: the same order can be enqueued again.
    await expect(current().service.enqueue(queue, 'charge', { id: 'order-1', amount: 5 })).resolves.toMatchObject({
      status: 'enqueued',
    });
  });

  it("releases through the page's form (urlencoded _csrf field) and redirects back to a notice", async () => {
    const { locks } = await lockedApp({ id: 'order-1', amount: 5 });
    const { digest, key } = locks[0];
    const page = await http(`${current().adminUrl}/`, { headers: { authorization: OPS, accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const setCookie = page.headers.getSetCookie()[0];
    expect(setCookie).toMatch(new RegExp(`^ujadmin_csrf=[\\w-]{43}; Path=/${ADMIN_PATH}; HttpOnly; SameSite=Strict$`));
    const token = /name="_csrf" value="([\w-]+)"/.exec(page.text)![1];
    expect(page.text).toContain(`data-digest="${digest}"`);
    expect(page.text).toContain('<b data-count="enqueue">1</b>');

    const posted = await http(`${current().adminUrl}/locks/${encodeURIComponent(digest)}/release`, {
      method: 'POST',
      headers: {
        authorization: OPS,
        cookie: setCookie.split(';')[0],
        'content-type': 'application/x-www-form-urlencoded',
        origin: current().origin,
      },
      body: new URLSearchParams({ _csrf: token, kind: 'enqueue', from: 'list' }).toString(),
    });
    expect(posted.status).toBe(303);
    const location = posted.headers.get('location')!;
    expect(location).toBe(`/${ADMIN_PATH}?notice=released&n=1&lock=${encodeURIComponent(digest)}`);
    expect(await redis.exists(key)).toBe(0);
    const after = await http(`${current().origin}${location}`, {
      headers: { authorization: OPS, accept: 'text/html' },
    });
    expect(after.text).toContain(`Released lock ${digest}: 1 key deleted.`);
    expect(after.text).not.toContain(`data-digest="${digest}"`);
    // The counts are reused between views for a few seconds, but never across a change made through the admin.
    expect(after.text).toContain('<b data-count="enqueue">0</b>');
  });

  it('under a global prefix, links, form actions, the cookie path and redirects include it', async () => {
    const queueName = uniqueName('adm');
    const app = await start({ queues: [lockedQueue(queueName)], globalPrefix: 'internal' });
    const result = await app.service.enqueue(app.queue(queueName), 'charge', { id: 'order-1', amount: 5 });
    if (result.status !== 'enqueued' || !result.digest) throw new Error('not enqueued');
    const digest = result.digest;
    const mount = `/internal/${ADMIN_PATH}`;
    const page = await http(`${app.adminUrl}/`, { headers: { authorization: OPS, accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.text).toContain(`href="${mount}/locks/${encodeURIComponent(digest)}"`);
    expect(page.text).toContain(`action="${mount}/locks/${encodeURIComponent(digest)}/release"`);
    expect(page.text).toContain(`href="${mount}/dead"`);
    const setCookie = page.headers.getSetCookie()[0];
    expect(setCookie).toContain(`; Path=${mount};`);
    const token = /name="_csrf" value="([\w-]+)"/.exec(page.text)![1];
    const posted = await http(`${app.adminUrl}/locks/${encodeURIComponent(digest)}/release`, {
      method: 'POST',
      headers: {
        authorization: OPS,
        cookie: setCookie.split(';')[0],
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ _csrf: token, from: 'detail' }).toString(),
    });
    expect(posted.status).toBe(303);
    expect(posted.headers.get('location')).toBe(
      `${mount}/locks/${encodeURIComponent(digest)}?notice=released&n=1&lock=${encodeURIComponent(digest)}`,
    );
  });

  it('lists, retries and deletes rejected duplicates; a retry while the lock is held is a duplicate again', async () => {
    const { queue, locks } = await lockedApp({ id: 'order-1', amount: 5 });
    const { digest, job } = locks[0];
    const auth = { authorization: OPS };
    const counts = async () => (await http(api('counts'), { headers: auth })).json as LockCounts;
    expect(await counts()).toEqual({ enqueueLocks: 1, runtimeLocks: 0, deadSet: 0, complete: true });
    await current().service.enqueue(queue, 'charge', { id: 'order-1', amount: 6 });
    // The lock counts may be reused for a few seconds; the rejected-duplicate count is read each time.
    expect((await counts()).deadSet).toBe(1);
    const csrf = await csrfOf(current());
    const mutate = (path: string, withToken = true) =>
      http(api(path), {
        method: 'POST',
        headers: { ...auth, cookie: csrf.cookie, ...(withToken ? { 'x-csrf-token': csrf.token } : {}) },
      });

    const list = (await http(api('dead'), { headers: auth })).json as AdminDeadSetPage;
    expect(list.total).toBe(1);
    const [entry] = list.entries;
    expect(entry).toMatchObject({ queue: queue.name, jobName: 'charge', digest, existingJobId: job.id });

    expect((await mutate(`dead/${entry.id}/retry`, false)).status).toBe(403);
    expect((await mutate(`dead/${entry.id}/delete`, false)).status).toBe(403);
    expect(await current().service.deadSet.get(entry.id)).toMatchObject({ id: entry.id });

    const again = await mutate(`dead/${entry.id}/retry`);
    expect(again.status).toBe(200);
    expect(again.json).toEqual({
      id: entry.id,
      result: { status: 'duplicate', existingJobId: job.id, strategy: 'reject' },
    });
    const [readded] = await current().service.deadSet.list();
    expect(readded.id).not.toBe(entry.id);
    expect(await current().service.deadSet.size()).toBe(1);

    expect((await mutate(`locks/${digest}/release`)).json).toEqual({ digest, released: 1 });
    const retried = await mutate(`dead/${readded.id}/retry`);
    expect(retried.status).toBe(200);
    const result = (retried.json as { result: { status: string; jobId: string } }).result;
    expect(result.status).toBe('enqueued');
    expect((await queue.getJob(result.jobId))?.data).toEqual({ id: 'order-1', amount: 6 });
    expect(await current().service.deadSet.size()).toBe(0);

    await current().service.enqueue(queue, 'charge', { id: 'order-1', amount: 7 });
    const [third] = await current().service.deadSet.list();
    expect((await mutate(`dead/${third.id}/delete`)).json).toEqual({ id: third.id, deleted: true });
    expect(await current().service.deadSet.size()).toBe(0);
    expect((await mutate(`dead/${third.id}/delete`)).status).toBe(404);
    expect((await mutate(`dead/${third.id}/retry`)).status).toBe(404);
    expect((await mutate('dead/not-an-id/delete')).status).toBe(400);
  });

  it('looks up an idempotency key in the configured store: state, result, fingerprint (never the owner token)', async () => {
    const queueName = uniqueName('admkeys');
    const app = await start({
      queues: [
        {
          queue: queueName,
          idempotency: { key: (job) => (job.data as { eventId: string }).eventId },
          handler: async (job) => ({ charged: (job.data as { amount: number }).amount }),
        },
      ],
    });
    const job = await app.queue(queueName).add('settle', { eventId: 'evt_<1>', amount: 42 });
    await expect(app.finished(queueName, job)).resolves.toEqual({ charged: 42 });
    const auth = { authorization: OPS };
    const scope = `${queueName}:settle`;

    const found = await http(api(`keys?scope=${encodeURIComponent(scope)}&key=${encodeURIComponent('evt_<1>')}`), {
      headers: auth,
    });
    expect(found.status).toBe(200);
    const lookup = found.json as AdminKeyLookup;
    expect(lookup).toMatchObject({ store: 'default', scope, key: 'evt_<1>' });
    expect(lookup.record).toMatchObject({
      scope,
      key: 'evt_<1>',
      state: 'completed',
      jobId: job.id,
      result: JSON.stringify({ charged: 42 }),
      attempts: 1,
    });
    expect(lookup.record!.fingerprint).toMatch(/^v1:/);
    expect(lookup.record).not.toHaveProperty('owner');
    // JSON output never carries a raw '<' (escaped as \u003c), so it cannot be sniffed as markup.
    expect(found.text).not.toContain('<');

    const missing = await http(api(`keys?scope=${encodeURIComponent(scope)}&key=evt_2`), { headers: auth });
    expect((missing.json as AdminKeyLookup).record).toBeNull();
    expect((await http(api(`keys?store=nope&scope=a&key=b`), { headers: auth })).status).toBe(400);
    expect((await http(api(`keys?scope=a`), { headers: auth })).status).toBe(400);

    const page = await http(
      `${app.adminUrl}/keys?scope=${encodeURIComponent(scope)}&key=${encodeURIComponent('evt_<1>')}`,
      {
        headers: { ...auth, accept: 'text/html' },
      },
    );
    expect(page.text).toMatch(/id="record-state"\s*>completed</);
    expect(page.text).toContain('evt_&lt;1&gt;');
    expect(page.text).not.toContain('evt_<1>');
  });

  it('refuses to mount without a guard (no opt-out) or with invalid options, at bootstrap', () => {
    const attempts: unknown[] = [
      { path: 'admin' },
      { path: 'admin', guard: undefined },
      { path: 'admin', guard: 'none-i-know-what-i-am-doing' },
      { path: 'admin', guard: false },
      { path: 'admin', guard: {} },
    ];
    for (const options of attempts) {
      expect(() => UniqueJobsAdminModule.forRoot(options as never)).toThrow(InvalidUniqueJobOptionsError);
      expect(() => UniqueJobsAdminModule.forRoot(options as never)).toThrow(/"guard" is required/);
    }
    const guard = TestAdminGuard;
    expect(() => UniqueJobsAdminModule.forRoot({ path: '', guard })).toThrow(/"path"/);
    expect(() => UniqueJobsAdminModule.forRoot({ path: '../x', guard })).toThrow(/"path"/);
    expect(() => UniqueJobsAdminModule.forRoot({ path: 'a b', guard })).toThrow(/"path"/);
    expect(() => UniqueJobsAdminModule.forRoot({ path: 'admin', guard, pageSize: 0 })).toThrow(/"pageSize"/);
    expect(() => UniqueJobsAdminModule.forRoot({ path: 'admin', guard, csrf: { secret: 'short' } })).toThrow(
      /"csrf.secret"/,
    );
    expect(() => UniqueJobsAdminModule.forRoot({ path: 'admin', guard, gaurd: guard } as never)).toThrow(
      /"gaurd" is not an option/,
    );
    expect(
      UniqueJobsAdminModule.forRoot({ path: '/admin/unique-jobs/', guard: { canActivate: () => true } }),
    ).toMatchObject({ module: UniqueJobsAdminModule });
  });

  it('fails to start without UniqueJobsModule, saying so', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [UniqueJobsAdminModule.forRoot({ path: 'admin', guard: TestAdminGuard })],
    }).compile();
    await expect(moduleRef.init()).rejects.toThrow(/UniqueJobsAdminModule needs UniqueJobsModule/);
    await moduleRef.close();
  });
});
