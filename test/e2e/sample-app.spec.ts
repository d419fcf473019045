// The sample app end to end: the demo's scenarios (sample-app/demo/scenarios.ts), run against the app as `npm run demo`
// runs it (an API process and a worker process, over HTTP), on TypeORM with SQLite and with PostgreSQL. Each check of
// a scenario is an assertion here. The app is the one `npm test` compiles into .build/sample-app, on the library of
// .build/lib (test/fixtures/sample-lib.ts), in a namespace of its own (Redis prefix, SQLite file, PostgreSQL schema).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { describeExit } from '../../sample-app/demo/app-process.js';
import { SampleApp } from '../../sample-app/demo/sample-app.js';
import { HOLD_POINTS, PaymentsStory, SCENARIOS, type Check } from '../../sample-app/demo/scenarios.js';
import { databaseUrl } from '../support/postgres.js';
import { uniqueName } from '../support/redis.js';

const build = (path: string) => fileURLToPath(new URL(`../../.build/${path}`, import.meta.url));
const main = build('sample-app/src/main.js');
const hook = build('test/fixtures/sample-lib.js');

/** The failed checks, in a form whose diff says what went wrong. */
const failed = (checks: Check[]) =>
  checks.filter((check) => !check.ok).map(({ what, expected, observed }) => ({ what, expected, observed }));

describe.each([
  { database: 'SQLite', url: undefined },
  { database: 'PostgreSQL', url: databaseUrl() },
])('the sample app on $database: the demo scenarios over HTTP', ({ url }) => {
  let app: SampleApp;
  let story: PaymentsStory;

  beforeAll(async () => {
    if (!existsSync(main) || !existsSync(hook)) {
      throw new Error(`${main} is missing: run the tests with \`npm test\` (it compiles the sample app)`);
    }
    app = await SampleApp.start({
      main: ['--import', pathToFileURL(hook).href, main],
      redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      databaseUrl: url,
      // uniqueName: the run's tag in every key, so the end-of-run check finds any the app leaves (scripts/leftover-keys.mjs).
      label: uniqueName('sample-e2e'),
      holdPoints: HOLD_POINTS,
    });
    story = new PaymentsStory(app);
  }, 60_000);

  afterAll(async () => {
    await app?.stop(); // after a failure; the last test stops it otherwise
  }, 30_000);

  for (const scenario of SCENARIOS) {
    it(`${scenario.number}. ${scenario.title}`, async () => {
      const checks = await scenario.run(story);
      expect(checks.length).toBeGreaterThan(0);
      expect(failed(checks)).toEqual([]);
    }, 90_000);
  }

  it('leaves no lock behind once every job finished, stops gracefully on SIGTERM, and removes its namespace', async () => {
    // Its schema came from the migrations it ran at startup (the library's, then the app's), not from `synchronize`.
    expect(await app.executedMigrations()).toEqual([
      'UniqueJobsIdempotency1767225600000',
      'SampleAppTables1767312000000',
    ]);
    const keys = await app.redisKeys();
    expect(keys.filter((key) => key.includes(':payments:') || key.includes(':charges:')).length).toBeGreaterThan(0);
    // Enqueue locks are BullMQ deduplication keys (`…:de:…`); the library's own keys are only the dead set's, the
    // registry of the queues it guards (what the CLI inspects), and the orphan reaper's leader lease while a worker
    // runs one.
    expect(keys.filter((key) => key.includes(':de:'))).toEqual([]);
    expect(keys.filter((key) => key.includes(':uj:') && !key.endsWith(':uj:{reaper}:leader')).sort()).toEqual([
      `${app.namespace}:uj:{dead}:bytes`,
      `${app.namespace}:uj:{dead}:entries`,
      `${app.namespace}:uj:{dead}:index`,
      `${app.namespace}:uj:{queues}:known`,
    ]);
    await app.stop();
    // Nest's shutdown hooks close the app, then re-raise the signal; a process that hung would be SIGKILLed instead.
    expect(describeExit(await app.api.exited)).toBe('SIGTERM');
    expect(describeExit(await app.worker.exited)).toBe('SIGTERM');
    expect(await app.redisKeys()).toEqual([]);
    expect(await app.databaseExists()).toBe(false);
  }, 30_000);
});
