// One jest phase of `npm test` (scripts/test-all.mjs): makes sure Redis and PostgreSQL are there (starting them if
// needed), compiles the child-process fixtures, runs jest with REDIS_URL and DATABASE_URL set (and the arguments given,
// e.g. `--config jest.chaos.config.mjs` or test paths), checks that the run left no key in that Redis (scripts/
// leftover-keys.mjs: one more test, failed if it did), and ends with one line: "N passed, N failed".
//
// `--full` (not passed to jest) sets UNIQUE_JOBS_CHAOS_FULL=1: the fault-injection suite's fleet scenario runs at its
// full figure (`npm run test:chaos -- --full`, test/chaos/fleet.chaos.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkLeftoverKeys, newRunTag, snapshotKeys } from './leftover-keys.mjs';
import { ensurePostgres, ensureRedisOrExit } from './services.mjs';

const full = process.argv.includes('--full');
const jestArgs = process.argv.slice(2).filter((arg) => arg !== '--full');

const redis = await ensureRedisOrExit();
let postgres;
try {
  postgres = await ensurePostgres();
} catch (error) {
  console.error(error.message);
  await redis.stop();
  process.exit(1);
}
// The run tag every uniqueName() of this run carries (test/support/redis.ts), and the keys there before the run.
const runTag = newRunTag();
const before = await snapshotKeys(redis.url);
const env = {
  ...process.env,
  UNIQUE_JOBS_RUN_TAG: runTag,
  ...(full ? { UNIQUE_JOBS_CHAOS_FULL: '1' } : {}),
  REDIS_URL: redis.url,
  DATABASE_URL: postgres.url,
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --experimental-vm-modules`.trim(),
};
let status = 1;
try {
  // `npm test` compiles the fixtures once for all its phases (scripts/test-all.mjs).
  const build = process.env.UNIQUE_JOBS_FIXTURES_BUILT
    ? { status: 0 }
    : spawnSync('sh', ['-c', 'npx tsc -p tsconfig.fixtures.json && node scripts/copy-lua.mjs .build/lib/redis'], {
        stdio: 'inherit',
        env,
      });
  if (build.status !== 0) throw new Error('compiling the test fixtures failed');
  const report = join(tmpdir(), `unique-jobs-jest-${process.pid}.json`);
  const jest = spawnSync('npx', ['jest', '--json', `--outputFile=${report}`, ...jestArgs], {
    stdio: 'inherit',
    env,
  });
  status = jest.status ?? 1;
  if (existsSync(report)) {
    const { numPassedTests, numFailedTests, numTotalTests, numRuntimeErrorTestSuites } = JSON.parse(
      readFileSync(report, 'utf8'),
    );
    rmSync(report);
    if (numTotalTests === 0) status = 1;
    const clean = await checkLeftoverKeys(redis.url, runTag, before).catch((error) => {
      console.log(`leftover keys: the check could not run: ${error.message}`);
      return false;
    });
    if (!clean) status = 1;
    console.log(
      `${numPassedTests + (clean ? 1 : 0)} passed, ${numFailedTests + numRuntimeErrorTestSuites + (clean ? 0 : 1)} failed`,
    );
  } else {
    console.log('0 passed, 1 failed');
  }
} catch (error) {
  console.error(error.message);
  console.log('0 passed, 1 failed');
} finally {
  await postgres.stop();
  await redis.stop();
}
process.exit(status);
