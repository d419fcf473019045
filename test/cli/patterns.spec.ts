// `unique-jobs locks list <glob>` with globs that made the old regular expression backtrack for minutes: the built
// executable, against real locks, answers at once with the right locks (it used to hang until killed).
import { describe, expect, it, jest } from '@jest/globals';
import type { HeldLock } from '../../lib/index.js';
import type { TestApp } from '../support/app.js';
import { useApps } from '../support/apps.js';
import { byId, digestOf } from '../support/locks.js';
import { runCli } from './run-cli.js';

jest.setTimeout(120_000);

type Listing = { locks: HeldLock[]; cursor: string };

/** The digests that hold each character of `chars` in order (what `*c*h*a*r*s*` matches). */
const holdsInOrder = (digests: readonly string[], chars: string) =>
  digests.filter((digest) => {
    let at = 0;
    for (const c of chars) {
      at = digest.indexOf(c, at) + 1;
      if (at === 0) return false;
    }
    return true;
  });

describe('unique-jobs locks list <pathological glob>', () => {
  const { start } = useApps('cli-pat', { unique: { lock: 'until_executed', lockArgs: byId }, paused: true });
  const scoped = (app: TestApp, ...args: string[]) => [...args, '--prefix', app.prefix, '--queue', app.queue.name];

  it('lists the matching locks within seconds', async () => {
    const app = await start();
    const ids = ['c1', 'c2', 'c3', 'c4'];
    for (const id of ids) await app.queue.add('job', { id });
    const digests = ids.map((id) => digestOf(app, 'job', { id })).sort();
    const target = digests[1].slice(3, 23);
    expect(holdsInOrder(digests, target)).toContain(digests[1]);

    for (const [pattern, expected] of [
      ['***************v*', digests],
      ['*?'.repeat(33), digests],
      ['*?'.repeat(100), []],
      [`*${[...target].join('*')}*`, holdsInOrder(digests, target)],
    ] as const) {
      const started = performance.now();
      // Killed after 20 s: with the backtracking RegExp the first pattern ran for far longer.
      const run = await runCli([...scoped(app, 'locks', 'list', pattern, '--limit', '1000'), '--json'], {
        timeoutMs: 20_000,
      });
      const elapsed = performance.now() - started;
      expect([pattern, run.code, run.stderr]).toEqual([pattern, 0, '']);
      const listing = JSON.parse(run.stdout) as Listing;
      const found = listing.locks.map((lock) => lock.digest).sort();
      expect([pattern, listing.cursor, found]).toEqual([pattern, '0', expected]);
      expect(elapsed).toBeLessThan(15_000);
    }

    const table = await runCli(scoped(app, 'locks', 'list', '*a*a*a*a*a*a*a*a*a*a*a*a*b'), { timeoutMs: 20_000 });
    expect(table.code).toBe(0);
  });
});
