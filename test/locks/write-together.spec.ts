// A general-path bulk's slot acquires, sent together, leave in one socket write per server: the library client's
// socket (each master's on a Cluster) is corked while they are sent and uncorked in the same tick
// (lib/redis/write-together.ts). Whatever happens meanwhile (an entry throwing, a cork of the client's owner, a huge
// bulk), no socket is left corked and every slot ends held by its job or given back. (A socket destroyed while ioredis
// still says ready, and auto-pipelining: test/regressions/bulk-slots.spec.ts, single Redis.)
import { describe, expect, it } from '@jest/globals';
import type { Cluster, Redis } from 'ioredis';
import { useApps } from '../support/apps.js';
import { byId, slotOwners } from '../support/locks.js';
import { UNIQUE_JOBS_REDIS } from '../../lib/nest/unique-jobs.constants.js';
import { countingAcquireWrites, countingScriptWrites, socketsOf } from '../support/socket-writes.js';

describe('a bulk’s acquires in one socket write', () => {
  const { redis, start } = useApps('wtogether', {
    unique: { lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
    paused: true,
  });

  /** An app and the library's client, connected, the acquire script known to every master it reached. */
  async function warmApp() {
    const app = await start();
    const lib = app.moduleRef.get<{ client: Redis | Cluster }>(UNIQUE_JOBS_REDIS).client;
    await app.queue.addBulk(Array.from({ length: 30 }, (_, n) => ({ name: 'sync', data: { id: `warm${n}` } })));
    return { app, lib };
  }
  const slotsOf = (app: Awaited<ReturnType<typeof start>>, ids: readonly string[]) => slotOwners(redis, app, ids);
  const masters = (lib: Redis | Cluster) => (lib.isCluster ? (lib as Cluster).nodes('master').length : 1);
  const corked = (lib: Redis | Cluster) => socketsOf(lib).map((socket) => socket.writableCorked);

  it('one write per server, every socket uncorked, every job added and holding its slot', async () => {
    const { app, lib } = await warmApp();
    const ids = Array.from({ length: 30 }, (_, n) => `w${n}`);
    let jobs: { id?: string }[] = [];
    const writes = await countingAcquireWrites(async () => {
      jobs = await app.queue.addBulk(ids.map((id) => ({ name: 'sync', data: { id } })));
    });
    expect(writes.reduce((a, b) => a + b, 0)).toBe(30);
    expect(writes.length).toBeLessThanOrEqual(masters(lib));
    expect(corked(lib).every((n) => n === 0)).toBe(true);
    expect(await slotsOf(app, ids)).toEqual(Object.fromEntries(ids.map((id, i) => [id, [jobs[i].id]])));
  });

  it.each([0, 2])('an entry throwing while sent (entry %i): no socket left corked, no slot kept', async (at) => {
    const { app, lib } = await warmApp();
    const ids = ['t0', 't1', 't2', 't3'];
    const failure = await app.queue
      .addBulk(
        ids.map((id, i) => ({
          name: 'sync',
          data: { id },
          ...(i === at ? { opts: { delay: Symbol('not a delay') as unknown as number } } : {}),
        })),
      )
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(Error);
    expect(corked(lib).every((n) => n === 0)).toBe(true);
    expect(await lib.ping()).toBe('PONG');
    expect(await slotsOf(app, ids)).toEqual(Object.fromEntries(ids.map((id) => [id, []])));
  });

  it('a client its owner corked: the owner’s cork stays, and the bulk goes when the owner uncorks', async () => {
    const { app, lib } = await warmApp();
    const sockets = socketsOf(lib);
    for (const socket of sockets) socket.cork();
    const pending = app.queue.addBulk(['c0', 'c1'].map((id) => ({ name: 'sync', data: { id } })));
    // The acquires sit in a corked socket's buffer, unsent: the library's cork and uncork left the owner's in place.
    while (!sockets.some((socket) => socket.writableLength > 0)) await new Promise((r) => setImmediate(r));
    expect(sockets.map((socket) => socket.writableCorked)).toEqual(sockets.map(() => 1));
    for (const socket of sockets) socket.uncork();
    expect(await pending).toHaveLength(2);
    expect(corked(lib).every((n) => n === 0)).toBe(true);
  });

  it('a bulk of 10,000: one write per server, every job added', async () => {
    const { app, lib } = await warmApp();
    const n = 10_000;
    const writes = await countingScriptWrites(
      () => app.queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'sync', data: { id: `h${i}` } }))),
      ['takeStamped', 'acquireLock'],
    );
    // First, alone, the bulk's announcement (lib/locks/bulks-in-progress.ts: a takeStamped call), then the slots'.
    expect(writes[0]).toEqual({ takeStamped: 1 });
    const acquires = writes.slice(1).map((write) => write.acquireLock ?? 0);
    expect(writes.slice(1).every((write) => write.takeStamped === undefined)).toBe(true);
    expect(acquires.reduce((a, b) => a + b, 0)).toBe(n);
    expect(acquires.length).toBeLessThanOrEqual(masters(lib));
    expect(corked(lib).every((count) => count === 0)).toBe(true);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: n + 30 });
  }, 60_000);
});
