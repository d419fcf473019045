// One jest phase of `npm test` (scripts/test-all.mjs): makes sure Redis and PostgreSQL are there (starting them if
// needed), compiles the child-process fixtures, runs jest with REDIS_URL and DATABASE_URL set (and the arguments given,
// e.g. `--config jest.chaos.config.mjs` or test paths), and ends with one line: "N passed, N failed".
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensurePostgres, ensureRedisOrExit } from './services.mjs';

const redis = await ensureRedisOrExit();
let postgres;
try {
  postgres = await ensurePostgres();
} catch (error) {
  console.error(error.message);
  await redis.stop();
  process.exit(1);
}
const env = {
  ...process.env,
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
  const jest = spawnSync('npx', ['jest', '--json', `--outputFile=${report}`, ...process.argv.slice(2)], {
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
    console.log(`${numPassedTests} passed, ${numFailedTests + numRuntimeErrorTestSuites} failed`);
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
