import { Cluster, Redis } from 'ioredis';
import { asError } from '../../errors/thrown.js';
import { CliError, EXIT } from './errors/cli.error.js';
import { clean, truncate } from './output.js';

/** The Redis the CLI reads when neither `--redis` nor `REDIS_URL` names one. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/**
 * How long connecting and the first PING may take in all before the CLI reports Redis unreachable (exit code 2), in
 * seconds, unless `--timeout` says otherwise.
 */
export const CONNECT_ANSWER_S = 10;
/**
 * How long any later command may wait for its answer (a master paused or cut off mid-scan would leave the command
 * waiting forever), in seconds, unless `--timeout` says otherwise: then the CLI reports Redis unreachable (exit code
 * 2). Its commands are small (a SCAN page, a read, a short script).
 */
export const COMMAND_ANSWER_S = 15;
/**
 * How long the goodbyes to Redis at the end (QUIT, a reaper's resignation) may take before the CLI drops the
 * connection: a Redis that stopped answering must not hold the exit for another whole timeout.
 */
export const CLOSE_MS = 1000;

/** How {@link connectCli} connects. */
export interface CliConnectionOptions {
  /** `--cluster`. */
  readonly cluster: boolean;
  /** The Redis URL without its password, for messages. */
  readonly label: string;
  /** Seconds connecting and the first answer may take. */
  readonly connectAnswerS: number;
  /** Seconds a command may wait for its answer. */
  readonly commandAnswerS: number;
  /** Every connection error (the last one names the cause better than "Connection is closed"). */
  onError(error: Error): void;
  /** The error reported when Redis cannot be reached. */
  unreachable(error: unknown): CliError;
}

/** The URL of `--redis` (or `REDIS_URL`), checked: a `redis://` or `rediss://` URL. */
export function parseRedisUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliError(`Invalid Redis URL ${JSON.stringify(withoutCredentials(text))}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new CliError(`Invalid Redis URL: it must start with redis:// or rediss:// (got ${url.protocol}//…)`);
  }
  return url;
}

/**
 * A client of `url`, connected and answering (its database selected, checked to be no Cluster node unless `--cluster`).
 * Fails fast: one attempt, no reconnection.
 */
export async function connectCli(url: URL, options: CliConnectionOptions): Promise<Redis | Cluster> {
  const common = {
    lazyConnect: true,
    connectTimeout: 5000,
    maxRetriesPerRequest: 1,
    commandTimeout: options.commandAnswerS * 1000,
    // ioredis' disconnect() of a socket that is already closed (a refused connection) waits this long for a 'close'
    // event that never comes: 2 s by default, as many seconds added to every run that could not connect.
    disconnectTimeout: 200,
  };
  if (options.cluster && !/^\/?0?$/.test(url.pathname)) {
    throw new CliError(`Invalid Redis URL: a Redis Cluster has database 0 only (got ${clean(url.pathname)})`);
  }
  const client: Redis | Cluster = options.cluster
    ? new Cluster([{ host: url.hostname, port: Number(url.port || 6379) }], {
        lazyConnect: true,
        clusterRetryStrategy: () => null,
        redisOptions: {
          connectTimeout: common.connectTimeout,
          maxRetriesPerRequest: common.maxRetriesPerRequest,
          commandTimeout: common.commandTimeout,
          disconnectTimeout: common.disconnectTimeout,
          ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
          ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
          ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
        },
      })
    : new Redis(url.href, { ...common, retryStrategy: () => null });
  // Connection errors surface as rejected commands; without a listener ioredis would also print each one.
  client.on('error', (error: Error) => options.onError(error));
  const db = client.isCluster ? 0 : ((client as Redis).options.db ?? 0);
  // ioredis reads the path with parseInt (`/2abc` is database 2): only digits name one.
  if (!Number.isSafeInteger(db) || db < 0 || (!client.isCluster && !/^\/?\d*$/.test(url.pathname))) {
    client.disconnect();
    throw new CliError('Invalid Redis URL: the database must be a number, as in redis://127.0.0.1:6379/2');
  }
  // connectTimeout bounds the TCP connect only: a server that accepts and never answers (a proxy, a paused or
  // overloaded Redis, a port that is not Redis) would leave the ready check or PING waiting forever.
  let timer: NodeJS.Timeout | undefined;
  const silent = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${options.connectAnswerS} s (is it a Redis server?)`)),
      options.connectAnswerS * 1000,
    );
  });
  try {
    const ready = async () => {
      await client.connect();
      await client.ping();
      // ioredis selects the URL's database when it connects, but a refused SELECT is only an 'error' event and the
      // client goes on in database 0: every command would read and change another database than the one named.
      if (db !== 0) await (client as Redis).select(db).catch((error: unknown) => refused(`database ${db}`, error));
      if (!client.isCluster && (await clusterEnabled(client as Redis))) {
        throw new CliError(
          `${options.label} is a node of a Redis Cluster: run again with --cluster (without it only this node's keys are seen)`,
        );
      }
    };
    const connecting = ready();
    connecting.catch(() => undefined); // its late rejection, once the timer has won, is not an unhandled one
    await Promise.race([connecting, silent]);
  } catch (error) {
    client.disconnect();
    throw error instanceof CliError ? error : options.unreachable(error);
  } finally {
    clearTimeout(timer);
  }
  return client;
}

/**
 * The error of a Redis that cannot be reached or stopped answering (exit code 2): `lastError`, the connection's last
 * error, names the cause better than the command's own.
 */
export function unreachableError(
  error: unknown,
  label: string,
  commandAnswerS: number,
  lastError: Error | undefined,
): CliError {
  const { message, lastNodeError } = asError(error) as Error & { lastNodeError?: unknown };
  // A Cluster client that could not learn the slots says only that; the node's own answer names the cause.
  const nodeReason = lastNodeError === undefined ? undefined : asError(lastNodeError).message;
  const reason = /Command timed out/.test(message)
    ? `no answer within ${commandAnswerS} s`
    : nodeReason || lastError?.message || message;
  return new CliError(`Cannot reach Redis at ${label}: ${truncate(reason, 500)}`, EXIT.unreachable);
}

/**
 * A URL that did not parse, as it may be shown: whatever stands between `//` and the last `@` (user and password, which
 * may hold `/` or `@`) and the value of a `password` parameter (ioredis reads one) masked.
 */
function withoutCredentials(text: string): string {
  const start = text.indexOf('//');
  const at = text.lastIndexOf('@');
  const masked = start >= 0 && at > start ? `${text.slice(0, start + 2)}***${text.slice(at)}` : text;
  return masked.replace(/([?&]password=)[^&#]*/gi, '$1***');
}

/** Throws the one-line error of a request the server refused. */
function refused(what: string, error: unknown): never {
  throw new CliError(`Redis refused ${what}: ${truncate(asError(error).message, 500)}`);
}

/** Whether a server is a Redis Cluster node (`false` when it does not say: INFO may be disabled). */
async function clusterEnabled(client: Redis): Promise<boolean> {
  const info = await client.info('cluster').catch(() => '');
  return /^cluster_enabled:1\s*$/m.test(info);
}
