import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import pg from 'pg';
import { redisConnection } from '../src/config.js';
import { AppProcess } from './app-process.js';

/** Where a run keeps its state: Redis keys under `prefix`, a temp directory, and a PostgreSQL schema if any. */
interface RunSpace {
  prefix: string;
  directory: string;
  schema?: string;
}

/** How to run the sample app for the demo (or a test). */
export interface SampleAppOptions {
  /** Node arguments that run the compiled `sample-app/src/main.js` (a path, preceded by node options if needed). */
  main: readonly string[];
  redisUrl: string;
  /** PostgreSQL instead of the SQLite default: the run gets a schema of its own there. */
  databaseUrl?: string;
  /** Names the run's Redis prefix, temp directory and schema (a random suffix is added). */
  label: string;
  /** Hold points the first worker arms (`SAMPLE_HOLD_POINTS`). */
  holdPoints?: readonly string[];
}

/**
 * The sample app running as two processes, an API and a worker, in a namespace of its own: Redis keys under a fresh
 * prefix, a fresh SQLite file (or PostgreSQL schema). {@link SampleApp.stop} stops both and removes all of it.
 */
export class SampleApp {
  private stopped?: Promise<void>;

  private constructor(
    private readonly options: SampleAppOptions,
    private readonly env: NodeJS.ProcessEnv,
    private readonly space: RunSpace,
    /** Base URL of the API, e.g. `http://127.0.0.1:41234`. */
    readonly url: string,
    readonly api: AppProcess,
    /** The current worker process ({@link restartWorker} replaces it). */
    public worker: AppProcess,
  ) {}

  /** The run's Redis prefix: BullMQ's keys are under `<namespace>:bull`, the library's under `<namespace>:uj`. */
  get namespace(): string {
    return this.space.prefix;
  }

  /** `TypeORM on SQLite (<file>)` or `TypeORM on PostgreSQL (schema <name>)`. */
  get database(): string {
    const where = this.space.schema ? `PostgreSQL (schema ${this.space.schema})` : `SQLite (${this.env.SQLITE_FILE})`;
    return `TypeORM on ${where}`;
  }

  /** Starts the API, then a worker that calls the API's simulated payment provider. */
  static async start(options: SampleAppOptions): Promise<SampleApp> {
    const run = `${options.label}-${randomUUID().slice(0, 8)}`;
    const directory = mkdtempSync(join(tmpdir(), `${options.label}-`));
    const schema = options.databaseUrl ? run.replace(/\W/g, '_') : undefined;
    const space: RunSpace = { prefix: run, directory, schema };
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_OPTIONS: '',
      REDIS_URL: options.redisUrl,
      QUEUE_PREFIX: `${run}:bull`,
      UNIQUE_JOBS_PREFIX: `${run}:uj`,
      SQLITE_FILE: join(directory, 'payments.db'),
    };
    delete env.DATABASE_URL;
    delete env.SAMPLE_HOLD_POINTS;
    const started: AppProcess[] = [];
    // Interrupted while starting (Ctrl-C before the caller could install its own handler): the processes started so
    // far are stopped and the run's namespace removed, as a failed start does.
    const interrupted = () =>
      void Promise.all(started.map((child) => child.kill('SIGKILL')))
        .then(() => removeNamespace(options, space))
        .finally(() => process.exit(130));
    process.once('SIGINT', interrupted);
    try {
      if (options.databaseUrl && schema) {
        await withPg(options.databaseUrl, (client) => client.query(`CREATE SCHEMA ${schema}`));
        const url = new URL(options.databaseUrl);
        url.searchParams.set('options', `-c search_path=${schema}`);
        env.DATABASE_URL = url.toString();
      }
      const api = new AppProcess('api', options.main, { ...env, ROLE: 'api', PORT: '0' });
      started.push(api);
      const { url } = (await api.waitFor('ready', (message) => message.ready === 'api')) as { url: string };
      env.PROVIDER_URL = `${url}/provider`;
      const worker = await startWorker(options.main, env, options.holdPoints ?? []);
      started.push(worker);
      return new SampleApp(options, env, space, url, api, worker);
    } catch (error) {
      await Promise.all(started.map((child) => child.kill('SIGKILL')));
      await removeNamespace(options, space);
      throw error;
    } finally {
      process.removeListener('SIGINT', interrupted);
    }
  }

  /** Starts a new worker (no hold points armed) once the current one has exited. */
  async restartWorker(): Promise<AppProcess> {
    await this.worker.exited;
    this.worker = await startWorker(this.options.main, this.env, []);
    return this.worker;
  }

  /** Stops both processes (SIGTERM), then removes the run's Redis keys, SQLite file or schema. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      try {
        await Promise.all([this.worker.stop(), this.api.stop()]);
      } finally {
        await removeNamespace(this.options, this.space);
      }
    })();
    return this.stopped;
  }

  /** The TypeORM migrations the app has run in its database (its `migrations` table), oldest first. */
  async executedMigrations(): Promise<string[]> {
    const query = 'SELECT name FROM migrations ORDER BY id';
    if (this.options.databaseUrl && this.space.schema) {
      const { rows } = await withPg(this.env.DATABASE_URL!, (client) => client.query<{ name: string }>(query));
      return rows.map((row) => row.name);
    }
    const database = new Database(this.env.SQLITE_FILE, { readonly: true, fileMustExist: true });
    try {
      return (database.prepare(query).all() as { name: string }[]).map((row) => row.name);
    } finally {
      database.close();
    }
  }

  /** Whether the run's SQLite file, or PostgreSQL schema, exists. */
  async databaseExists(): Promise<boolean> {
    if (this.options.databaseUrl && this.space.schema) {
      const { rows } = await withPg(this.options.databaseUrl, (client) =>
        client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [this.space.schema]),
      );
      return rows.length > 0;
    }
    return existsSync(this.env.SQLITE_FILE!);
  }

  /** Keys left under the run's prefixes (BullMQ's and the library's). */
  async redisKeys(): Promise<string[]> {
    return withRedis(this.options.redisUrl, (redis) => scan(redis, `${this.space.prefix}:*`));
  }
}

async function startWorker(main: readonly string[], env: NodeJS.ProcessEnv, holdPoints: readonly string[]) {
  const worker = new AppProcess('worker', main, { ...env, ROLE: 'worker', SAMPLE_HOLD_POINTS: holdPoints.join(',') });
  try {
    await worker.waitFor('ready', (message) => message.ready === 'worker');
    return worker;
  } catch (error) {
    await worker.kill('SIGKILL');
    throw error;
  }
}

async function removeNamespace(options: SampleAppOptions, space: RunSpace): Promise<void> {
  await withRedis(options.redisUrl, async (redis) => {
    const keys = await scan(redis, `${space.prefix}:*`);
    for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
  });
  if (options.databaseUrl && space.schema) {
    await withPg(options.databaseUrl, (client) => client.query(`DROP SCHEMA IF EXISTS ${space.schema} CASCADE`));
  }
  rmSync(space.directory, { recursive: true, force: true });
}

async function scan(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

async function withRedis<T>(url: string, work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(redisConnection(url));
  try {
    return await work(redis);
  } finally {
    await redis.quit();
  }
}

async function withPg<T>(connectionString: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
