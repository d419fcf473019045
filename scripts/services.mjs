// Finds or starts the services the tests need: REDIS_URL if set, else 127.0.0.1:6379 if it answers, else a
// redis-server from PATH on a free port (stopped by stop()). Fails with one line saying what to install.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function ping(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => done(data.toString().startsWith('+PONG') || data.toString().startsWith('-NOAUTH')));
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

function onPath(binary) {
  return spawnSync('sh', ['-c', `command -v ${binary}`]).status === 0;
}

/** Resolves { url, stop } for a Redis that answers. */
export async function ensureRedis() {
  if (process.env.REDIS_URL) {
    const url = new URL(process.env.REDIS_URL);
    if (!(await ping(url.hostname, Number(url.port || 6379)))) {
      throw new Error(`REDIS_URL=${process.env.REDIS_URL} does not answer PING`);
    }
    return { url: process.env.REDIS_URL, stop: async () => undefined };
  }
  if (await ping('127.0.0.1', 6379)) return { url: 'redis://127.0.0.1:6379', stop: async () => undefined };
  if (!onPath('redis-server')) {
    throw new Error(
      'Redis is not running and redis-server is not installed: install Redis (e.g. `apt-get install redis-server`) or set REDIS_URL',
    );
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'unique-jobs-redis-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    {
      stdio: 'ignore',
    },
  );
  for (let i = 0; i < 100 && !(await ping('127.0.0.1', port)); i++) await new Promise((r) => setTimeout(r, 50));
  if (!(await ping('127.0.0.1', port))) throw new Error(`redis-server did not start on port ${port}`);
  console.log(`Started redis-server on 127.0.0.1:${port} for this run`);
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** {@link ensureRedis}, or exit with its one-line reason (what to install). */
export async function ensureRedisOrExit() {
  try {
    return await ensureRedis();
  } catch (error) {
    console.error(error.message);
    process.exit(1);
  }
}
