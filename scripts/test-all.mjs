// `npm test` (the README's test command): the whole suite in three phases, each against real services —
//   1. jest on a single Redis + PostgreSQL (scripts/test.mjs),
//   2. the lock and idempotency suites on a local 3-master Redis Cluster (scripts/cluster.mjs),
//   3. the fault-injection suite, each scenario on a Redis server of its own (jest.chaos.config.mjs),
// and ends with one line "N passed, N failed" over all three. With arguments (`npm test -- test/locks`), it runs only
// phase 1 with those jest arguments.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = (name) => fileURLToPath(new URL(`./${name}`, import.meta.url));
const args = process.argv.slice(2);
const SUMMARY = /^(\d+) passed, (\d+) failed/;

/** Runs one phase with its output shown as it goes; resolves its exit code and last summary line's counts. */
function phase(title, file, phaseArgs, env = {}) {
  console.log(`\n== ${title}`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script(file), ...phaseArgs], {
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
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
    child.on('exit', (code, signal) =>
      resolve({ code: code ?? (signal ? 1 : 0), counts: counts ?? { passed: 0, failed: 1 } }),
    );
  });
}

if (args.length > 0) {
  const { code } = await phase('jest', 'test.mjs', args);
  process.exit(code);
}

const phases = [
  await phase('single Redis + PostgreSQL', 'test.mjs', []),
  // The fixtures compiled by phase 1 serve the next phases.
  await phase('Redis Cluster (3 masters, spare ports)', 'cluster.mjs', [], { UNIQUE_JOBS_FIXTURES_BUILT: '1' }),
  await phase('fault injection (a Redis server per scenario)', 'test.mjs', ['--config', 'jest.chaos.config.mjs'], {
    UNIQUE_JOBS_FIXTURES_BUILT: '1',
  }),
];
const passed = phases.reduce((sum, { counts }) => sum + counts.passed, 0);
const failed = phases.reduce((sum, { counts }) => sum + counts.failed, 0);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(phases.some(({ code }) => code !== 0) || failed > 0 ? 1 : 0);
