// The admin's digest glob (`?pattern=` of the locks page and of `api/locks`) against real locks: patterns that made the
// old regular expression backtrack for minutes (freezing the whole process, workers' lease renewals included) are
// answered at once with the right locks, and the page keeps the glob in its filter form and its paging links.
import { describe, expect, it } from '@jest/globals';
import type { LockPage } from '../../lib/index.js';
import { mountPath, type AdminRequest } from '../../lib/ops/admin/http.js';
import { adminUrl } from '../../lib/ops/admin/views/html.js';
import { uniqueName } from '../support/redis.js';
import { http, OPS, useAdminApp } from './admin-app.js';

interface Order {
  id: string;
}

/** Every digest in `digests` that holds each character of `chars` in order (what `*c*h*a*r*s*` matches). */
const holdsInOrder = (digests: readonly string[], chars: string) =>
  digests.filter((digest) => {
    let at = 0;
    for (const c of chars) {
      at = digest.indexOf(c, at) + 1;
      if (at === 0) return false;
    }
    return true;
  });

describe('admin digest patterns', () => {
  const { start } = useAdminApp();

  it('answers pathological globs at once, on the JSON API and the page', async () => {
    const queueName = uniqueName('admpat');
    const app = await start({
      queues: [{ queue: queueName, paused: true, unique: { lock: 'until_executed', lockArgs: (d: Order) => d.id } }],
    });
    const digests: string[] = [];
    for (const id of ['o1', 'o2', 'o3', 'o4', 'o5', 'o6']) {
      const result = await app.service.enqueue(app.queue(queueName), 'charge', { id });
      if (result.status !== 'enqueued' || !result.digest) throw new Error(`order ${id} was not enqueued`);
      digests.push(result.digest);
    }
    digests.sort();
    const target = digests[2].slice(3, 23); // 20 characters of one digest, each after a `*`
    const cases: [string, string[]][] = [
      ['***************v*', digests],
      ['*?'.repeat(33), digests], // 66 characters: every digest (67)
      ['*a*a*a*a*a*a*a*a*a*a*a*a*b', holdsInOrder(digests, 'aaaaaaaaaaaab')],
      ['*?'.repeat(100), []], // needs 100 characters; a digest has 67
      [`*${[...target].join('*')}*`, holdsInOrder(digests, target)],
    ];
    expect(cases[4][1]).toContain(digests[2]);

    for (const [pattern, expected] of cases) {
      const started = performance.now();
      const answer = await http(`${app.adminUrl}/api/locks?pattern=${encodeURIComponent(pattern)}&limit=500`, {
        headers: { authorization: OPS },
      });
      const elapsed = performance.now() - started;
      expect([pattern, answer.status]).toEqual([pattern, 200]);
      const page = answer.json as LockPage;
      expect([pattern, page.cursor, page.locks.map((lock) => lock.digest).sort()]).toEqual([pattern, '0', expected]);
      expect(elapsed).toBeLessThan(5000);
    }

    const started = performance.now();
    const page = await http(`${app.adminUrl}/?pattern=${encodeURIComponent(cases[0][0])}&limit=2`, {
      headers: { authorization: OPS, accept: 'text/html' },
    });
    expect(performance.now() - started).toBeLessThan(5000);
    expect(page.status).toBe(200);
    // The filter form and the next-page link keep the glob as typed.
    expect(page.text).toContain(`name="pattern" value="${cases[0][0]}"`);
    expect(page.text).toMatch(/rel="next" href="[^"]*pattern&#61;\*{15}v\*&amp;/);
    expect(page.text.match(/<tr data-digest="/g)).toHaveLength(2);

    const bad = await http(`${app.adminUrl}/api/locks?pattern=${encodeURIComponent('*'.repeat(201))}`, {
      headers: { authorization: OPS },
    });
    expect(bad.status).toBe(400);
    expect((bad.json as { message: string }).message).toMatch(/Invalid digest pattern/);
  });

  // `/\/+$/` tried every run of slashes in turn: 2 s on 40,000 slashes and one other character, minutes on 300,000
  // (past this test's timeout). A request path is read before any route matches it.
  it('takes trailing slashes off a path of 300,000 slashes at once', () => {
    const slashes = '/'.repeat(300_000);
    const req = (url: string) => ({ url, originalUrl: url }) as AdminRequest;
    expect(mountPath(req(`${slashes}x`), 0) === `${slashes}x`).toBe(true);
    expect(mountPath(req(`/admin/locks${slashes}`), 1)).toBe('/admin');
    expect(mountPath(req(`http://h${slashes}x?y`), 0) === `${slashes}x`).toBe(true);
    expect(adminUrl(`/admin${slashes}x${slashes}`, ['locks'])).toBe(`/admin${slashes}x/locks`); // one leading slash
    expect(adminUrl(`/admin${slashes}`)).toBe('/admin');
  });
});
