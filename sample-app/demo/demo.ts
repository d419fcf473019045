// `npm run demo` (scripts/demo.mjs builds the library and the sample, makes sure Redis answers, then runs this): starts
// the sample app as an API process and a worker process, replays the payments story over HTTP, prints what happened
// as a table and exits 0 only if every expectation held. The app's database is TypeORM on a SQLite file, or on
// PostgreSQL when DATABASE_URL is set. The run lives in a namespace of its own (Redis prefix, SQLite file or
// PostgreSQL schema), removed at the end.
import { fileURLToPath } from 'node:url';
import { SampleApp } from './sample-app.js';
import { HOLD_POINTS, PaymentsStory, SCENARIOS, type Check } from './scenarios.js';

async function main(): Promise<number> {
  const started = Date.now();
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  console.log('Starting the sample app (an API process and a worker process)…');
  const app = await SampleApp.start({
    main: [fileURLToPath(new URL('../src/main.js', import.meta.url))],
    redisUrl,
    databaseUrl: process.env.DATABASE_URL || undefined,
    label: 'sample-demo',
    holdPoints: HOLD_POINTS,
  });
  console.log(`  API ${app.url} (pid ${app.api.pid}), worker pid ${app.worker.pid}`);
  console.log(`  ${app.database}, Redis ${redisUrl}`);
  const stop = () => void app.stop().finally(() => process.exit(130));
  process.once('SIGINT', stop);

  const checks: Check[] = [];
  try {
    const story = new PaymentsStory(app, (line) => console.log(`     · ${line}`));
    for (const scenario of SCENARIOS) {
      console.log(`\n  ${scenario.number}. ${scenario.title}`);
      const scenarioStarted = Date.now();
      try {
        const result = await scenario.run(story);
        checks.push(...result);
        const held = result.filter((c) => c.ok).length;
        const seconds = ((Date.now() - scenarioStarted) / 1000).toFixed(1);
        console.log(
          `     ${held === result.length ? '✓' : '✗'} ${held} of ${result.length} expectations held (${seconds} s)`,
        );
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        checks.push({
          scenario: scenario.number,
          what: 'ran to its end',
          expected: 'yes',
          observed: message,
          ok: false,
        });
        console.log(`     ✗ ${message}`);
        break; // the next scenarios build on this one
      }
    }
  } finally {
    process.off('SIGINT', stop);
    await app.stop();
  }

  console.log(`\n${table(checks)}\n`);
  const failed = checks.filter((check) => !check.ok).length;
  const ranAll = new Set(checks.map((check) => check.scenario)).size === SCENARIOS.length;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (failed === 0 && ranAll) {
    console.log(`Every expectation held (${checks.length} checks, ${seconds} s).`);
    return 0;
  }
  console.log(`${failed} expectation(s) failed${ranAll ? '' : ', and not every scenario ran'} (${seconds} s).`);
  return 1;
}

/** The checks as a text table, one section per scenario. */
function table(checks: readonly Check[]): string {
  const width = (texts: string[]) => Math.max(...texts.map((text) => text.length));
  const what = width(['Check', ...checks.map((check) => `   ${check.what}`)]);
  const expected = width(['Expected', ...checks.map((check) => check.expected)]);
  const observed = width(['Observed', ...checks.map((check) => check.observed)]);
  const line = (a: string, b: string, c: string, mark = '') =>
    `${a.padEnd(what)}  ${b.padEnd(expected)}  ${c.padEnd(observed)}  ${mark}`.trimEnd();
  const out = [
    line('Check', 'Expected', 'Observed', 'Held'),
    line('─'.repeat(what), '─'.repeat(expected), '─'.repeat(observed), '────'),
  ];
  for (const scenario of SCENARIOS) {
    const own = checks.filter((check) => check.scenario === scenario.number);
    out.push(`${scenario.number}. ${scenario.title}${own.length === 0 ? '  (not run)' : ''}`);
    for (const check of own)
      out.push(line(`   ${check.what}`, check.expected, check.observed, check.ok ? '✓' : '✗ FAILED'));
  }
  return out.join('\n');
}

main().then(
  (status) => process.exit(status),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
