import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { InvalidUniqueJobOptionsError, UniqueJobsAdminModule } from '../../lib/index.js';
import { bullPrefix, redisClient, uniqueName } from '../support/redis.js';
import { csrfOf, INTRUDER, OPS, startAdminApp, TestAdminGuard, type AdminTestApp } from './admin-app.js';

/** One request with the given `Host` header (fetch cannot set it; `undefined`: none), to the app's own address. */
function withHost(
  url: string,
  host: string | undefined,
  init: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers = host === undefined ? { ...init.headers } : { ...init.headers, host };
    const req = request(url, { method: init.method ?? 'GET', headers, setHost: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Sends raw bytes (a request with `Connection: close`) to 127.0.0.1:`port`; resolves everything the server answered
 * before closing. The socket is not half-closed: Node's server drops a request whose client ended before the answer.
 */
function rawRequest(port: string, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(bytes));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe('admin allowedHosts (DNS rebinding)', () => {
  let app: AdminTestApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('answers only the listed hosts: any other Host gets 421 before the guard runs, and a POST from it changes nothing', async () => {
    const queueName = uniqueName('admh');
    app = await startAdminApp({
      queues: [
        { queue: queueName, paused: true, unique: { lock: 'until_executed', lockArgs: (d: { id: string }) => d.id } },
      ],
      admin: { allowedHosts: ['127.0.0.1', 'Ops.Example:8443'] },
    });
    const enqueued = await app.service.enqueue(app.queue(queueName), 'charge', { id: 'order-1' });
    if (enqueued.status !== 'enqueued' || !enqueued.digest) throw new Error('not enqueued');
    const key = `${bullPrefix()}:${queueName}:de:uj:${enqueued.digest}`;
    const port = new URL(app.origin).port;
    const csrf = await csrfOf(app);
    const release = `${app.adminUrl}/api/locks/${enqueued.digest}/release`;

    // What a rebinding page sends: its own name as Host, and as Origin (same-origin for the browser).
    // Without a Host at all, Node's server answers 400 itself (requireHostHeader); the guard would answer 421.
    const refused = (host: string | undefined) => (host === undefined ? 400 : 421);
    for (const host of [`attacker.example:${port}`, 'ops.example:9999', `localhost:${port}`, 'bad host', undefined]) {
      for (const url of [app.adminUrl, `${app.adminUrl}/api/locks`, `${app.adminUrl}/api/counts`]) {
        // The intruder's credentials would be a 403 from the guard: 421 shows the host check ran first.
        const answer = await withHost(url, host, { headers: { authorization: INTRUDER } });
        expect([host, url, answer.status]).toEqual([host, url, refused(host)]);
        expect(answer.body).not.toContain(enqueued.digest);
      }
      const posted = await withHost(release, host, {
        method: 'POST',
        headers: { authorization: OPS, cookie: csrf.cookie, 'x-csrf-token': csrf.token, origin: `http://${host}` },
      });
      expect([host, posted.status]).toEqual([host, refused(host)]);
    }
    const redis = redisClient();
    try {
      expect(await redis.get(key)).toBe(enqueued.job.id);
      // The listed hosts: a name without a port on any port, one with a port on that port, case-insensitive.
      for (const host of [`127.0.0.1:${port}`, '127.0.0.1', 'ops.example:8443', 'OPS.EXAMPLE:8443']) {
        const page = await withHost(`${app.adminUrl}/api/locks`, host, { headers: { authorization: OPS } });
        expect([host, page.status]).toEqual([host, 200]);
        expect(page.body).toContain(enqueued.digest);
      }
      const released = await withHost(release, `127.0.0.1:${port}`, {
        method: 'POST',
        headers: { authorization: OPS, cookie: csrf.cookie, 'x-csrf-token': csrf.token, origin: app.origin },
      });
      expect(released.status).toBe(200);
      expect(await redis.exists(key)).toBe(0);
    } finally {
      await redis.quit();
    }
  });

  it('compares hosts as browsers send them: canonical IPs, no trailing dot, ports as numbers; two Host headers refused', async () => {
    app = await startAdminApp({
      queues: [{ queue: uniqueName('admh'), paused: true }],
      admin: { allowedHosts: ['127.1', 'OPS.example.com.', '[0:0:0:0:0:0:0:1]', 'ops2.example:08443', 'my_admin'] },
    });
    const port = new URL(app.origin).port;
    const url = `${app.adminUrl}/api/counts`;
    const cases: [string, number][] = [
      [`127.0.0.1:${port}`, 200],
      ['ops.example.com', 200],
      ['ops.example.com.:8080', 200],
      [`[::1]:${port}`, 200],
      ['ops2.example:8443', 200],
      ['ops2.example:08443', 200],
      ['ops2.example', 421],
      ['ops2.example:443', 421],
      ['ops.example.com..', 421],
      ['127.0.0.2', 421],
      ['my_admin:3000', 200], // Docker Compose service names have `_`
    ];
    for (const [host, status] of cases) {
      const answer = await withHost(url, host, { headers: { authorization: OPS } });
      expect([host, answer.status]).toEqual([host, status]);
    }
    // Node keeps the first of two Host headers; a proxy in front may have routed on the second.
    const twoHosts = await rawRequest(
      port,
      `GET ${new URL(url).pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: attacker.example\r\n` +
        `Authorization: ${OPS}\r\nConnection: close\r\n\r\n`,
    );
    expect(twoHosts.split('\r\n')[0]).toBe('HTTP/1.1 421 Misdirected Request');
  });

  it('judges an absolute-form request line by the host it names: another host than Host is refused, with or without allowedHosts', async () => {
    const queueName = uniqueName('admh');
    for (const allowedHosts of [['127.0.0.1'], undefined]) {
      const current = await startAdminApp({
        queues: [
          { queue: queueName, paused: true, unique: { lock: 'until_executed', lockArgs: (d: { id: string }) => d.id } },
        ],
        admin: allowedHosts ? { allowedHosts } : {},
      });
      app = current;
      const port = new URL(app.origin).port;
      const path = new URL(app.adminUrl).pathname;
      const enqueued = await app.service.enqueue(app.queue(queueName), 'charge', { id: 'order-1' });
      if (enqueued.status !== 'enqueued' || !enqueued.digest) throw new Error('not enqueued');
      const csrf = await csrfOf(app);
      const get = (target: string) =>
        rawRequest(
          port,
          `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ${OPS}\r\nConnection: close\r\n\r\n`,
        );
      const post = (target: string) =>
        rawRequest(
          port,
          `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: ${OPS}\r\nCookie: ${csrf.cookie}\r\n` +
            `X-CSRF-Token: ${csrf.token}\r\nOrigin: ${current.origin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
        );
      const status = (answer: string) => answer.split('\r\n')[0];
      const release = `${path}/api/locks/${enqueued.digest}/release`;
      // The host check (allowedHosts) answers 421 for every route; without it, mutations are refused by the origin check.
      if (allowedHosts) {
        expect(status(await get(`http://attacker.example${path}/api/counts`))).toBe('HTTP/1.1 421 Misdirected Request');
        expect(status(await get(`http://127.0.0.1:${port}${path}/api/counts`))).toBe('HTTP/1.1 200 OK');
        // A port left out is the scheme's default, on either side.
        for (const [target, host] of [
          [`https://127.0.0.1:443${path}/api/counts`, '127.0.0.1:443'],
          [`https://127.0.0.1${path}/api/counts`, '127.0.0.1:443'],
          [`http://127.0.0.1${path}/api/counts`, '127.0.0.1'],
        ]) {
          const answer = await rawRequest(
            port,
            `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${OPS}\r\nConnection: close\r\n\r\n`,
          );
          expect([target, status(answer)]).toEqual([target, 'HTTP/1.1 200 OK']);
        }
      }
      // The page's links and the CSRF cookie's path are the target's path, not its whole URL.
      const page = await get(`http://127.0.0.1:${port}${path}/keys?x=1`);
      expect(status(page)).toBe('HTTP/1.1 200 OK');
      expect(page).toContain(`href="${path}/dead"`);
      expect(page).toContain(`Path=${path}`);
      expect(page).not.toContain('href="http');
      const refused = status(await post(`http://attacker.example:${port}${release}`));
      expect(refused).toBe(allowedHosts ? 'HTTP/1.1 421 Misdirected Request' : 'HTTP/1.1 403 Forbidden');
      const redis = redisClient();
      try {
        const key = `${bullPrefix()}:${queueName}:de:uj:${enqueued.digest}`;
        expect(await redis.get(key)).toBe(enqueued.job.id);
        expect(status(await post(`http://127.0.0.1:${port}${release}`))).toBe('HTTP/1.1 200 OK');
        expect(await redis.exists(key)).toBe(0);
      } finally {
        await redis.quit();
      }
      await app.close();
      app = undefined;
    }
  });

  it('refuses invalid allowedHosts at bootstrap, naming the option', () => {
    const guard = TestAdminGuard;
    for (const allowedHosts of [
      [],
      'ops.example.com',
      ['https://ops.example.com'],
      ['ops.example.com:0'],
      ['a:70000'],
      ['*.example.com'],
      ['ops example'],
      [42],
      ['ops.example.com:443'], // browsers leave default ports out of Host: it could never match
      ['ops.example.com:080'],
      ['[1.2.3.4]'],
      ['999.999.999.999'],
      ['[:]'],
    ]) {
      const mount = () => UniqueJobsAdminModule.forRoot({ path: 'admin', guard, allowedHosts } as never);
      expect(mount).toThrow(InvalidUniqueJobOptionsError);
      expect(mount).toThrow(/"allowedHosts"/);
    }
    for (const allowedHosts of [['ops.example.com'], ['localhost:3000', '[::1]:3000', '[::1]', '10.0.0.7']]) {
      expect(UniqueJobsAdminModule.forRoot({ path: 'admin', guard, allowedHosts })).toMatchObject({
        module: UniqueJobsAdminModule,
      });
    }
  });
});
