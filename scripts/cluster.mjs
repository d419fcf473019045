// A throwaway local Redis Cluster: three masters (`redis-server --cluster-enabled yes`) on free ports in a temp dir,
// joined with `redis-cli --cluster create … --cluster-replicas <n>`, ready once every node's `cluster info` says ok
// (and, with replicas, every replica's link to its master is up).
//
// `npm run test:cluster` (this file run directly): starts the cluster, runs `node scripts/test.mjs --config
// jest.cluster.config.mjs` with REDIS_CLUSTER_NODES set (extra arguments go to jest), stops the cluster and exits
// with the tests' status. The last line printed is test.mjs's "N passed, N failed". `--replicas=<n>` gives each master
// n replicas; `--jest-config=<file>` runs another jest config (the failover phase: both).
//
// Imported: `startCluster({ replicas })` resolves { nodes: ['127.0.0.1:<port>', …], stop() }; a SIGINT or SIGTERM
// while it starts stops the nodes started so far and ends the process.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HOST = '127.0.0.1';
const MASTERS = 3;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, HOST, () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Runs redis-cli against one node; resolves its stdout ('' when it failed). */
function cli(port, ...args) {
  return new Promise((resolve) => {
    execFile('redis-cli', ['-h', HOST, '-p', String(port), ...args], { timeout: 10_000 }, (error, stdout) =>
      resolve(error ? '' : stdout),
    );
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 100 ms until it resolves true or `ms` pass. */
async function until(check, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(100);
  }
  return false;
}

/**
 * Starts one cluster-enabled node (client port and cluster bus port both free); resolves { port, child }. `spawned`
 * hears of every process it starts, at once (to stop them whatever happens next).
 */
async function startNode(dir, spawned) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const bus = await freePort();
    if (bus === port) continue;
    // prettier-ignore
    const child = spawn('redis-server', [
      '--port', String(port), '--bind', HOST, '--cluster-enabled', 'yes', '--cluster-port', String(bus),
      '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--logfile', `redis-${port}.log`,
    ], { stdio: 'ignore' });
    spawned(child);
    let exited = false;
    child.once('exit', () => (exited = true));
    if (await until(async () => exited || (await cli(port, 'ping')).trim() === 'PONG', 10_000)) {
      if (!exited) return { port, child };
    } else {
      child.kill('SIGKILL');
    }
    // A port taken between freePort() and the bind: try other ports.
    if (attempt === 3) throw new Error(`redis-server did not start in cluster mode (see ${dir}/redis-${port}.log)`);
  }
}

/**
 * Whether every node sees the whole cluster: state ok, all 16384 slots assigned, every node known, and every replica
 * known as one by every node and linked to its master.
 */
async function clusterReady(ports, replicas) {
  for (const port of ports) {
    const info = await cli(port, 'cluster', 'info');
    if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return false;
    if (!new RegExp(`cluster_known_nodes:${ports.length}\\b`).test(info)) return false;
    const seenReplicas = (await cli(port, 'cluster', 'nodes')).split('\n').filter((line) => /\bslave\b/.test(line));
    if (seenReplicas.length !== MASTERS * replicas) return false;
    const replication = await cli(port, 'info', 'replication');
    if (!/role:/.test(replication)) return false; // the call failed
    if (/role:slave/.test(replication) && !/master_link_status:up/.test(replication)) return false;
  }
  return true;
}

/**
 * Starts a 3-master Redis Cluster, each master with `replicas` replicas; resolves { nodes, stop }. stop() kills the
 * nodes and deletes the temp dir.
 */
export async function startCluster({ replicas = 0 } = {}) {
  if (spawnSync('sh', ['-c', 'command -v redis-server && command -v redis-cli']).status !== 0) {
    throw new Error(
      'redis-server and redis-cli are needed for the cluster tests (e.g. `apt-get install redis-server`)',
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'unique-jobs-cluster-'));
  const nodes = [];
  const children = [];
  const stop = async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', resolve);
            child.kill('SIGTERM');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  // A signal while the nodes start (Ctrl-C, a CI timeout) stops those already started before the process ends: the
  // caller's own handlers come only once this resolves.
  const onSignal = (signal) => void stop().then(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, onSignal);
  try {
    for (let i = 0; i < MASTERS * (1 + replicas); i++)
      nodes.push(await startNode(dir, (child) => children.push(child)));
    const ports = nodes.map(({ port }) => port);
    const addresses = ports.map((port) => `${HOST}:${port}`);
    const create = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'],
      { encoding: 'utf8', timeout: 60_000 },
    );
    if (create.status !== 0) {
      throw new Error(
        `redis-cli --cluster create failed: ${`${create.stdout}${create.stderr}`.trim().split('\n').slice(-5).join(' | ')}`,
      );
    }
    if (!(await until(() => clusterReady(ports, replicas), 30_000))) {
      throw new Error(`the cluster on ${addresses.join(', ')} did not reach cluster_state:ok within 30 s`);
    }
    return { nodes: addresses, stop };
  } catch (error) {
    await stop();
    throw error;
  } finally {
    for (const signal of ['SIGINT', 'SIGTERM']) process.off(signal, onSignal);
  }
}

async function main() {
  const option = (name) => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
  const replicas = Number(option('replicas') ?? 0);
  const jestConfig = option('jest-config') ?? 'jest.cluster.config.mjs';
  const jestArgs = process.argv.slice(2).filter((arg) => !/^--(replicas|jest-config)=/.test(arg));
  let cluster;
  try {
    cluster = await startCluster({ replicas });
  } catch (error) {
    console.error(error.message);
    console.log('0 passed, 1 failed');
    process.exit(1);
  }
  const each = replicas > 0 ? ` (${replicas} replica(s) per master)` : '';
  console.log(`Started a ${MASTERS}-master Redis Cluster${each} on ${cluster.nodes.join(', ')} for this run`);
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('./test.mjs', import.meta.url)), '--config', jestConfig, ...jestArgs],
    { stdio: 'inherit', env: { ...process.env, REDIS_CLUSTER_NODES: cluster.nodes.join(',') } },
  );
  // Ctrl-C or a CI timeout: let test.mjs stop its services, then stop the cluster (the exit handler below).
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  const [code, signal] = await new Promise((resolve) => child.once('exit', (...args) => resolve(args)));
  await cluster.stop();
  process.exit(code ?? (signal ? 1 : 0));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
