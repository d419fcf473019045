// `npm test` (the README's test command): lint, then the whole suite in three phases, each against real services —
//   0. lint: `npm run lint` (tsc over the whole project, eslint, prettier, the layering of lib/), counted as one test,
//   1. jest on a single Redis + PostgreSQL (scripts/test.mjs); its suite test/package packs the library (the prepack
//      script builds dist/ in a copy), installs it into a fresh Nest app and boots it,
//   2. the lock and idempotency suites on a local 3-master Redis Cluster (scripts/cluster.mjs), but the two long
//      idempotency suites whose Redis side the store's suite covers there,
//   3. the failover suite, on a 3-master Redis Cluster of its own with a replica each (jest.cluster-failover.config.mjs:
//      a failover disturbs every client of the master it moves, so not beside phase 2's suites),
//   4. the fault-injection suite, each scenario on a Redis server of its own (jest.chaos.config.mjs; the fleet scenario
//      at its CI figure: `npm run test:chaos -- --full` for the full one),
// and ends with one line "N passed, N failed" over all five. Each jest phase counts one more test: the check that it
// left no key in the shared Redis (scripts/leftover-keys.mjs). A failed phase does not stop the next ones (their
// results still count); the exit status is 1 if any failed. With arguments (`npm test -- test/locks`), it runs only
// phase 1 with those jest arguments (no lint).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const scriptFile = (name) => fileURLToPath(new URL(`./${name}`, import.meta.url));
const args = process.argv.slice(2);
const SUMMARY = /^(\d+) passed, (\d+) failed/;

/**
 * Runs one phase with its output shown as it goes; resolves its exit code and counts: those of its last summary line,
 * or, for a command that prints none (`counted`), 1 passed or 1 failed by its exit code.
 */
function phase(title, command, commandArgs, { env = {}, counted = false } = {}) {
  console.log(`\n== ${title}`);
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, commandArgs, {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    });
    let counts;
    let pending = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) {
        const match = SUMMARY.exec(line);
        if (match) counts = { passed: Number(match[1]), failed: Number(match[2]) };
      }
    });
    const forward = (signal) => child.kill(signal);
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, forward);
    child.on('exit', (code, signal) => {
      for (const name of ['SIGINT', 'SIGTERM']) process.off(name, forward);
      const status = code ?? (signal ? 1 : 0);
      if (counted) counts = status === 0 ? { passed: 1, failed: 0 } : { passed: 0, failed: 1 };
      // How long each phase took, so that the run's time (CI keeps it well under 20 minutes) can be told apart.
      console.log(`-- ${title.replace(/ \(.*$/, '')}: ${Math.round((performance.now() - started) / 1000)} s`);
      resolve({ code: status, counts: counts ?? { passed: 0, failed: 1 } });
    });
  });
}

/** A phase that runs one of scripts/*.mjs with this Node. */
const script = (title, file, scriptArgs, env = {}) =>
  phase(title, process.execPath, [scriptFile(file), ...scriptArgs], { env });

if (args.length > 0) {
  const { code } = await script('jest', 'test.mjs', args);
  process.exit(code);
}

const phases = [
  await phase('lint (npm run lint: tsc, eslint, prettier, layers; counts as one test)', 'npm', ['run', 'lint'], {
    counted: true,
  }),
  await script('single Redis + PostgreSQL', 'test.mjs', []),
  // The fixtures compiled by phase 1 serve the next phases. The cluster phase leaves out the two long idempotency
  // suites (about a minute on a cluster): what they do in Redis is the Redis store's, whose suite runs on the cluster
  // (test/idempotency/redis-store.spec.ts); `npm run test:cluster` runs them too.
  await script(
    'Redis Cluster (3 masters, spare ports)',
    'cluster.mjs',
    ['--testPathIgnorePatterns', 'test/idempotency/(idempotency-key|effect-once)\\.spec\\.ts$'],
    { UNIQUE_JOBS_FIXTURES_BUILT: '1' },
  ),
  await script(
    'Redis Cluster failover (3 masters with a replica each, spare ports)',
    'cluster.mjs',
    ['--replicas=1', '--jest-config=jest.cluster-failover.config.mjs'],
    { UNIQUE_JOBS_FIXTURES_BUILT: '1' },
  ),
  await script('fault injection (a Redis server per scenario)', 'test.mjs', ['--config', 'jest.chaos.config.mjs'], {
    UNIQUE_JOBS_FIXTURES_BUILT: '1',
  }),
];
const passed = phases.reduce((sum, { counts }) => sum + counts.passed, 0);
const failed = phases.reduce((sum, { counts }) => sum + counts.failed, 0);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(phases.some(({ code }) => code !== 0) || failed > 0 ? 1 : 0);
