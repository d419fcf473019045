// Hostile review (session 36) of the operator surfaces: the admin page and JSON API, the CLI, their options and
// their input. Each case here failed before its fix.
import 'reflect-metadata';
import { describe, expect, it, jest } from '@jest/globals';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BullModule } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import { InvalidUniqueJobOptionsError, UniqueJobsAdminModule, UniqueJobsModule } from '../../lib/index.js';
import { ADMIN_DEADLINE_MS } from '../../lib/ops/admin/deadline.interceptor.js';
import { http, OPS, useAdminApp } from '../admin/admin-app.js';
import { runCli } from '../cli/run-cli.js';
import { useApps } from '../support/apps.js';
import { asEnqueued, byId } from '../support/locks.js';
import { PrivateRedis } from '../support/private-redis.js';
import { bullOptions, uniqueName } from '../support/redis.js';

jest.setTimeout(120_000);

// `UniqueJobsAdminModule.forRoot` checked its top-level keys but not what was inside them: a misspelt CSRF option
// (`secureCookies`) was dropped without a word (the cookie stayed without `Secure` behind a TLS proxy), a
// `csrf.identity` that is not a function made every page a 500, `queues: [null]` failed the bootstrap with a bare
// TypeError, and a `title` object was printed as "[object Object]".
describe('session 36: admin options inside csrf, queues, idempotencyStores, imports, title', () => {
  const guard = { canActivate: () => true };

  it.each([
    ['csrf.secureCookies', { csrf: { secureCookies: true } }, /"csrf\.secureCookies" is not an option; valid: secret/],
    ['csrf as a string', { csrf: 'on' }, /"csrf" must be an object/],
    ['csrf.identity not a function', { csrf: { identity: 'user' } }, /"csrf\.identity" must be a function/],
    ['csrf.secureCookie "false"', { csrf: { secureCookie: 'false' } }, /"csrf\.secureCookie" must be true or false/],
    ['csrf.secret a number', { csrf: { secret: 12345 } }, /"csrf\.secret" must be a string or a Uint8Array/],
    ['csrf.allowedOrigins a string', { csrf: { allowedOrigins: 'https://ops.example' } }, /"csrf\.allowedOrigins"/],
    ['queues [null]', { queues: [null] }, /"queues\[0\]" must be a BullMQ Queue, a queue name/],
    ['queues [42]', { queues: ['ok', 42] }, /"queues\[1\]"/],
    ['queue name with ":"', { queues: ['a:b'] }, /"queues\[0\]".*has no ":"/],
    ['queue {name, prfix}', { queues: [{ name: 'q', prfix: 'x' }] }, /"queues\[0\]"/],
    ['idempotencyStores a string', { idempotencyStores: 'redis' }, /"idempotencyStores" must be an object/],
    ['idempotencyStores.x null', { idempotencyStores: { x: null } }, /"idempotencyStores\.x" must be an Idempotency/],
    ['imports a module', { imports: 'AuthModule' }, /"imports" must be an array/],
    ['title an object', { title: { text: 'Ops' } }, /"title" must be a string/],
  ])('%s: refused at forRoot, naming the option', (_label, bad, message) => {
    const mount = () => UniqueJobsAdminModule.forRoot({ path: 'admin', guard, ...(bad as object) });
    expect(mount).toThrow(InvalidUniqueJobOptionsError);
    expect(mount).toThrow(message);
  });

  it('valid nested options still pass', async () => {
    const queue = new Queue(uniqueName('s36q'), bullOptions());
    try {
      const store = { get: async () => undefined };
      expect(() =>
        UniqueJobsAdminModule.forRoot({
          path: 'admin',
          guard,
          csrf: {
            secret: new Uint8Array(32),
            identity: () => 'ops',
            allowedOrigins: ['https://ops.example'],
            secureCookie: true,
          },
          queues: [queue, 'payments', { name: 'emails' }, { name: 'sms', prefix: 'other' }],
          idempotencyStores: { default: store as never },
          imports: [],
          title: 'Ops',
        }),
      ).not.toThrow();
    } finally {
      await queue.close();
    }
  });
});

// With Redis down, every admin request waited as long as the outage lasted: the application's connection queues
// commands while Redis is away (BullMQ needs `maxRetriesPerRequest: null`), and the admin had no deadline of its own
// (each refresh added another request, and another bounded-but-200-SCAN count, to the queue). Now a request is
// answered 503 past ADMIN_DEADLINE_MS, saying why.
describe('session 36: admin while Redis is down', () => {
  it('answers 503 within its deadline, as JSON and as a page, instead of hanging', async () => {
    const redis = await PrivateRedis.start();
    const connection = { host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null };
    const moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection }),
        BullModule.registerQueue({ name: 's36down' }),
        UniqueJobsModule.forRoot({ connection, prefix: 's36down', logger: false }),
        UniqueJobsAdminModule.forRoot({ path: 'admin', guard: { canActivate: () => true } }),
      ],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    try {
      await app.listen(0, '127.0.0.1');
      const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
      const base = `http://127.0.0.1:${port}/admin`;
      expect((await fetch(`${base}/api/locks`)).status).toBe(200);
      await redis.kill();
      const ask = async (path: string, accept: string) => {
        const started = performance.now();
        // The client's own limit is far past the deadline: a hang fails here, not at jest's timeout.
        const answer = await fetch(`${base}${path}`, { headers: { accept }, signal: AbortSignal.timeout(60_000) });
        return { status: answer.status, text: await answer.text(), ms: performance.now() - started };
      };
      const [api, page] = await Promise.all([ask('/api/locks', 'application/json'), ask('/dead', 'text/html')]);
      for (const answer of [api, page]) {
        expect(answer.status).toBe(503);
        expect(answer.text).toContain('No answer within 10 s from Redis');
        expect(answer.ms).toBeGreaterThanOrEqual(ADMIN_DEADLINE_MS - 100);
        expect(answer.ms).toBeLessThan(ADMIN_DEADLINE_MS + 20_000);
      }
      expect(page.text).toContain('<title>503');
      await redis.restart();
      // Once Redis is back, the same process answers again.
      expect((await fetch(`${base}/api/locks`)).status).toBe(200);
    } finally {
      await app.close();
      await redis.stop();
    }
  });
});

// The CLI escaped control characters of Redis data (job ids, names, data) but printed the bidirectional formatting
// characters raw: a job id `inv<U+202E>exe.fdp` read `invpdf.exe` in a terminal that applies bidi, and an owner line
// could be made to look like another. They are escaped now, in the text output and in --json.
describe('session 36: CLI output of bidi formatting characters', () => {
  const { start } = useApps('s36bidi', {
    unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
    paused: true,
  });
  const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

  it('locks show prints a job id and name holding U+202E, U+2066 and U+200F escaped', async () => {
    const app = await start();
    const jobId = 'inv\u202eexe.fdp\u2066x\u2069';
    const { digest } = asEnqueued(await app.service.enqueue(app.queue, 'n\u200fame', { id: 'b' }, { jobId }));
    const text = await runCli(['locks', 'show', digest!, '--prefix', app.prefix]);
    const json = await runCli(['locks', 'show', digest!, '--prefix', app.prefix, '--json']);
    expect([text.code, json.code]).toEqual([0, 0]);
    expect(text.stdout).toContain('job inv\\u202eexe.fdp\\u2066x\\u2069');
    expect(text.stdout).toContain('n\\u200fame');
    expect(json.stdout).toContain('inv\\u202eexe.fdp');
    for (const output of [text.stdout, json.stdout]) expect(output).not.toMatch(BIDI);
  });
});

// The admin page HTML-escaped a job id and name holding bidirectional formatting characters, but a browser still
// applied them: `inv<U+202E>exe.fdp` read `invpdf.exe` in its cell. They are shown as `\uXXXX` in the page's text, and
// kept in attribute values (links and forms name the job exactly).
describe('session 36: admin page of a job id holding bidi formatting characters', () => {
  const { start } = useAdminApp();

  it('shows them escaped in the lock page and the lock list', async () => {
    const queueName = uniqueName('s36bidi-admin');
    const app = await start({
      queues: [{ queue: queueName, paused: true, unique: { lock: 'until_executed', lockArgs: () => 'x' } }],
    });
    const jobId = 'inv\u202eexe.fdp';
    const result = await app.service.enqueue(app.queue(queueName), 'n\u200fame', { id: 'x' }, { jobId });
    expect(result.status).toBe('enqueued');
    const page = (url: string) => http(url, { headers: { authorization: OPS, accept: 'text/html' } });
    for (const url of [`${app.adminUrl}/locks/${result.digest!}`, `${app.adminUrl}/`]) {
      const answer = await page(url);
      expect(answer.status).toBe(200);
      expect(answer.text).toContain('inv\\u202eexe.fdp');
      expect(answer.text).not.toMatch(/>[^<]*[\u202e\u200f][^<]*</);
    }
  });
});
