// Finds or starts the services the tests need: REDIS_URL if set, else 127.0.0.1:6379 if it answers, else a
// redis-server from PATH on a free port (stopped by stop()). Fails with one line saying what to install.
// PostgreSQL likewise: DATABASE_URL if set, else postgres://postgres@127.0.0.1:5432/test (or the OS user) if it
// answers, else a throwaway server (initdb + pg_ctl) in a temp dir on a free port.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';

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

/** Resolves true when a TCP connection to host:port opens. */
function tcpOpen(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => done(true));
  });
}

/** Runs `select 1` on a PostgreSQL URL: resolves undefined when it answers, else the error (with pg's `code`). */
async function selectOne(url) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Creates database `name` through the server's `postgres` database (an existing one is fine). */
async function createDatabase(serverUrl, name) {
  const { default: pg } = await import('pg');
  const url = new URL(serverUrl);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(`CREATE DATABASE "${name}"`);
  } catch (error) {
    if (error.code !== '42P04') return error; // 42P04: duplicate_database
  } finally {
    await client.end().catch(() => undefined);
  }
  return undefined;
}

/** The directory holding initdb and pg_ctl: from PATH, else the newest /usr/lib/postgresql/<version>/bin. */
function postgresBinDir() {
  const which = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) {
    const dir = dirname(realpathSync(which.stdout.trim()));
    if (existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  for (const version of versions) {
    const dir = join(root, version, 'bin');
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  return undefined;
}

function shellQuote(arg) {
  return `'${String(arg).replace(/'/g, `'\\''`)}'`;
}

/**
 * How to run the server's binaries: initdb and postgres refuse to run as root, so as root they run as the `postgres`
 * OS user (runuser, else su) and the temp dir is handed to that user.
 */
function serverUser() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    return { run: (binary, args) => spawnSync(binary, args, { encoding: 'utf8' }), chown: () => undefined };
  }
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error(
      'PostgreSQL is not running and, as root, there is no `postgres` OS user to start a throwaway server as: install PostgreSQL (e.g. `apt-get install postgresql`) or set DATABASE_URL',
    );
  }
  const ids = [Number(uid.stdout.trim()), Number(gid.stdout.trim())];
  const run = onPath('runuser')
    ? (binary, args) => spawnSync('runuser', ['-u', 'postgres', '--', binary, ...args], { encoding: 'utf8' })
    : (binary, args) =>
        spawnSync('su', ['postgres', '-s', '/bin/sh', '-c', [binary, ...args].map(shellQuote).join(' ')], {
          encoding: 'utf8',
        });
  return { run, chown: (path) => chownSync(path, ...ids) };
}

/** Starts a throwaway PostgreSQL server (trust auth, database `test`) in a temp dir on a free port. */
async function startPostgres() {
  const bin = postgresBinDir();
  if (!bin) {
    throw new Error(
      'PostgreSQL is not running and initdb/pg_ctl are not installed: install PostgreSQL (e.g. `apt-get install postgresql`) or set DATABASE_URL',
    );
  }
  const user = serverUser();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'unique-jobs-pg-'));
  const data = join(dir, 'data');
  const log = join(dir, 'server.log');
  const pgCtl = join(bin, 'pg_ctl');
  const fail = (step, result) => {
    const logText = existsSync(log) ? readFileSync(log, 'utf8') : '';
    rmSync(dir, { recursive: true, force: true });
    const output = `${result.stderr ?? ''}${result.stdout ?? ''}${logText}`.trim().split('\n').slice(-5).join(' | ');
    return new Error(`${step} failed (${result.error?.message ?? `exit ${result.status}`}): ${output}`);
  };
  try {
    user.chown(dir);
    const init = user.run(join(bin, 'initdb'), [
      '-D',
      data,
      '--auth=trust',
      '--username=postgres',
      '--encoding=UTF8',
      '--no-locale',
      '--no-sync',
    ]);
    if (init.status !== 0) throw fail('initdb', init);
    const options = `-p ${port} -k ${shellQuote(dir)} -c listen_addresses=127.0.0.1 -c fsync=off`;
    const start = user.run(pgCtl, ['-D', data, '-l', log, '-w', '-t', '60', '-o', options, 'start']);
    if (start.status !== 0) throw fail('pg_ctl start', start);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const stop = async () => {
    user.run(pgCtl, ['-D', data, '-m', 'fast', '-w', 'stop']);
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `postgres://postgres@127.0.0.1:${port}/test`;
  const error = (await createDatabase(url, 'test')) ?? (await selectOne(url));
  if (error) {
    await stop();
    throw new Error(`the throwaway PostgreSQL server on port ${port} does not answer: ${error.message}`);
  }
  console.log(`Started PostgreSQL (${bin}) on 127.0.0.1:${port} for this run`);
  return { url, stop };
}

/**
 * Resolves { url, stop } for a PostgreSQL database that answers `select 1`: DATABASE_URL if set; else database `test`
 * on 127.0.0.1:5432 as user `postgres`, then as the OS user (creating database `test` if it is missing); else a throwaway server
 * that stop() stops and deletes. UNIQUE_JOBS_START_POSTGRES=1 skips the first two and always starts a throwaway server
 * (to test that path, or to isolate a run).
 */
export async function ensurePostgres() {
  const none = async () => undefined;
  if (process.env.UNIQUE_JOBS_START_POSTGRES !== '1') {
    if (process.env.DATABASE_URL) {
      const error = await selectOne(process.env.DATABASE_URL);
      if (error) throw new Error(`DATABASE_URL=${process.env.DATABASE_URL} does not answer select 1: ${error.message}`);
      return { url: process.env.DATABASE_URL, stop: none };
    }
    if (await tcpOpen('127.0.0.1', 5432)) {
      for (const user of [...new Set(['postgres', userInfo().username])]) {
        const url = `postgres://${encodeURIComponent(user)}@127.0.0.1:5432/test`;
        let error = await selectOne(url);
        if (error?.code === '3D000') error = (await createDatabase(url, 'test')) ?? (await selectOne(url)); // 3D000: no such database
        if (!error) return { url, stop: none };
      }
    }
  }
  return startPostgres();
}
