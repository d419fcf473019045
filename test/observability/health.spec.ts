// The terminus health indicator in a real Nest HTTP application (TerminusModule, platform-express, GET /health): up
// against the shared Redis with its details; degraded when the dead set passes a threshold; scripts loaded again after
// a SCRIPT FLUSH and down after the Redis stops: both on a redis-server this test starts on a free port (never the
// shared one).
import { readdirSync } from 'node:fs';
import { get } from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, Query } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { UniqueJobsHealthIndicator, UniqueJobsHealthModule, UniqueJobsReaper } from '../../lib/index.js';
import { releaseHeld } from '../support/gates.js';
import { byId } from '../support/locks.js';
import { uniqueName } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import {
  startObservedApp,
  startOwnRedis,
  type ObservedApp,
  type ObservedAppOptions,
  type OwnRedis,
} from './helpers.js';

/** The library's scripts (one file each, includes aside). */
const SCRIPT_COUNT = readdirSync(new URL('../../lib/redis/scripts/', import.meta.url)).filter((file) =>
  file.endsWith('.lua'),
).length;

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly uniqueJobs: UniqueJobsHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check(@Query('threshold') threshold?: string, @Query('timeout') timeout?: string) {
    return this.health.check([
      () =>
        this.uniqueJobs.isHealthy('uniqueJobs', {
          ...(threshold === undefined ? {} : { deadSetThreshold: Number(threshold) }),
          ...(timeout === undefined ? {} : { timeout: Number(timeout) }),
        }),
    ]);
  }
}

interface HealthBody {
  status: string;
  details: Record<string, Record<string, unknown>>;
}

/** GET /health on a connection of its own (no keep-alive socket outlives the test). */
function getHealth(app: ObservedApp, query = ''): Promise<{ status: number; body: HealthBody }> {
  return new Promise((resolve, reject) => {
    get(`${app.url}/health${query}`, { agent: false }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as HealthBody }));
      response.on('error', reject);
    }).on('error', reject);
  });
}

describe('UniqueJobsHealthIndicator over HTTP', () => {
  const apps: ObservedApp[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  const start = async (options: Partial<ObservedAppOptions>): Promise<ObservedApp> => {
    const app = await startObservedApp({
      queue: uniqueName('health'),
      imports: [TerminusModule, UniqueJobsHealthModule],
      controllers: [HealthController],
      http: true,
      ...options,
    });
    apps.push(app);
    return app;
  };
  afterEach(async () => {
    releaseHeld();
    for (const app of apps.splice(0)) await app.close();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('is up with its details, degraded past the dead-set threshold, and reports the reaper run', async () => {
    const app = await start({
      unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
      paused: true,
    });
    let { status, body } = await getHealth(app);
    expect(status).toBe(200);
    expect(body.status).toBe('ok');
    expect(body.details.uniqueJobs).toEqual({
      status: 'up',
      store: 'up',
      latencyMs: expect.any(Number),
      scripts: { total: SCRIPT_COUNT, loadedNow: expect.any(Number) },
      deadSet: 0,
      reaper: { state: 'not run yet' },
    });

    await app.queue.add('pay', { id: 'h1' });
    await app.queue.add('pay', { id: 'h1' }); // rejected: kept in the dead set
    ({ status, body } = await getHealth(app, '?threshold=0'));
    expect(status).toBe(200);
    expect(body.status).toBe('degraded');
    expect(body.details.uniqueJobs).toMatchObject({
      status: 'degraded',
      deadSet: 1,
      message: 'the dead set holds 1 entries (threshold 0)',
    });

    const report = await app.moduleRef.get(UniqueJobsReaper).run();
    ({ body } = await getHealth(app));
    expect(body.details.uniqueJobs.reaper).toEqual({
      state: 'ok',
      lastRunAt: new Date(report.startedAt + report.durationMs).toISOString(),
      leader: report.leader,
      complete: report.complete,
    });
  });

  it('loads the scripts a restarted Redis lost, and is down (503) once its Redis stops', async () => {
    const own: OwnRedis = await startOwnRedis();
    cleanups.push(() => own.stop());
    // The lock connection is the test's own client (the module leaves a client it was given open).
    // (A socket still connecting to the stopped server is destroyed on disconnect at once, not after ioredis's 2 s.)
    const connection = new Redis({ host: '127.0.0.1', port: own.port, maxRetriesPerRequest: 1, disconnectTimeout: 10 });
    connection.on('error', () => undefined);
    cleanups.push(async () => void connection.disconnect()); // before the server stops (cleanups run last first)
    const app = await start({ module: { connection } });
    // The app recorded its queue in the registry the CLI reads (one script, at bootstrap): start from a server that
    // has no script loaded.
    await waitFor('the queue registry', async () => (await own.client.exists(`${app.prefix}:{queues}:known`)) === 1);
    await own.client.script('FLUSH');

    let { status, body } = await getHealth(app);
    expect(status).toBe(200);
    // A fresh server has none of them: the check loads them all, and finds them there the next time.
    expect(body.details.uniqueJobs.scripts).toEqual({ total: SCRIPT_COUNT, loadedNow: SCRIPT_COUNT });
    ({ body } = await getHealth(app));
    expect(body.details.uniqueJobs.scripts).toEqual({ total: SCRIPT_COUNT, loadedNow: 0 });
    await own.client.script('FLUSH'); // this test's own redis-server
    ({ body } = await getHealth(app));
    expect(body.details.uniqueJobs.scripts).toEqual({ total: SCRIPT_COUNT, loadedNow: SCRIPT_COUNT });

    await own.stop();
    ({ status, body } = await getHealth(app, '?timeout=500'));
    expect(status).toBe(503);
    expect(body.status).toBe('error');
    expect(body.details.uniqueJobs).toMatchObject({ status: 'down', store: 'down' });
    expect(body.details.uniqueJobs.message).toMatch(/^Lock store: /);
  });
});
