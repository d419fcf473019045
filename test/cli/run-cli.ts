// Runs the built `unique-jobs` executable (lib/ops/cli/bin.ts, compiled by `npm test` into .build/) as a child process
// against the run's Redis, and answers its exit code and output.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bullPrefix, clusterNodes } from '../support/redis.js';

const BIN = fileURLToPath(new URL('../../.build/lib/ops/cli/bin.js', import.meta.url));

/** What a CLI run printed and its exit code. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The connection options for the run's Redis (a Cluster node and the `{bull}` prefix on a cluster run). */
function connectionArgs(): string[] {
  const nodes = clusterNodes();
  if (nodes)
    return ['--cluster', '--redis', `redis://${nodes[0].host}:${nodes[0].port}`, '--bull-prefix', bullPrefix()];
  return ['--redis', process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'];
}

/**
 * A Node option that shifts the wall clock (`Date.now()`, `new Date()`) of the process it starts by `ms`, as on a
 * machine whose clock is off; its timers, monotonic, are untouched.
 */
export function skewedClock(ms: number): string {
  const source = `const R = Date, n = R.now.bind(R); globalThis.Date = class extends R { constructor(...a) { a.length ? super(...a) : super(n() + ${ms}); } static now() { return n() + ${ms}; } };`;
  return `--import=data:text/javascript,${encodeURIComponent(source)}`;
}

/**
 * Runs `unique-jobs <args>` and resolves when it exits (killed after `timeoutMs`). `connect: false` leaves the Redis
 * options out (for tests of them); `closeStdout: true` closes the reading end of its standard output at once;
 * `nodeArgs`: options for Node itself (e.g. {@link skewedClock}).
 */
export function runCli(
  args: readonly string[],
  options: { connect?: boolean; timeoutMs?: number; closeStdout?: boolean; nodeArgs?: readonly string[] } = {},
): Promise<CliRun> {
  if (!existsSync(BIN))
    throw new Error(`${BIN} is missing: run the tests with \`npm test\` (it compiles lib/ into .build/)`);
  const argv = [...(options.connect === false ? [] : connectionArgs()), ...args];
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), BIN, ...argv], {
    env: { ...process.env, NODE_OPTIONS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  // A reader that stops before the output comes (`| head -1`): the CLI's writes meet a closed pipe (EPIPE).
  if (options.closeStdout) child.stdout.destroy();
  else child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs the CLI with `--json` and parses its standard output (failing with the output when it is not JSON). */
export async function runCliJson<T = Record<string, unknown>>(
  args: readonly string[],
): Promise<{ code: number | null; json: T; stderr: string }> {
  const run = await runCli([...args, '--json']);
  try {
    return { code: run.code, json: JSON.parse(run.stdout) as T, stderr: run.stderr };
  } catch {
    throw new Error(`not JSON (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  }
}
