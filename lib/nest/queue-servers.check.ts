import type { Cluster, Redis } from 'ioredis';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import { sameServerWithin } from '../redis/same-server.js';

/** How long a check waits for a queue's server to say who it is (a Redis out of reach is not checked). */
export const SERVER_CHECK_MS = 3_000;

/** A queue as far as its server is concerned: its name and BullMQ's backend (whose client it reaches Redis with). */
export interface CheckedQueue {
  readonly name: string;
  getBackend(): unknown;
}

/**
 * The first of `queues` known to live elsewhere than the library's connection (another server, database or ioredis
 * `keyPrefix`, or a Redis Cluster beside a single server's client: its locks are read and released there, the reaper
 * reads the queues' jobs there and would free live locks), as the error that says so, and whether it is fatal;
 * `undefined` when every queue that answered within {@link SERVER_CHECK_MS} is on it. `given`: the connection was given
 * to `forRoot` (the message then leaves the default connection out), and then another server only is not fatal
 * (logged): a server answering under another run id, or a single server's client where the queues use a Cluster (a
 * proxy in front of it), is trusted to be the caller's choice, where another database or key prefix never is.
 */
export async function queueApart(
  library: Redis | Cluster,
  queues: readonly CheckedQueue[],
  given: boolean,
): Promise<{ error: InvalidUniqueJobOptionsError; fatal: boolean } | undefined> {
  const answers = await Promise.all(
    queues.map(async (queue) => {
      const client = (queue.getBackend() as { client?: Promise<unknown> }).client;
      return { queue, same: await sameServerWithin(library, Promise.resolve(client), SERVER_CHECK_MS) };
    }),
  );
  const apart = answers.find(({ same }) => same !== true && same !== undefined);
  if (!apart) return undefined;
  const queue = `queue "${apart.queue.name}"`;
  const fix = given
    ? "give forRoot the queues' connection"
    : "give forRoot the queues' connection (it uses BullModule.forRoot's default configuration, else 127.0.0.1:6379: a configuration registered only under a configKey, or a queue's own connection, is not read)";
  const error = new InvalidUniqueJobOptionsError(
    'UniqueJobsModule.forRoot',
    'connection',
    apart.same === 'keyPrefix'
      ? `names keys with another ioredis keyPrefix than ${queue} (same server and database): the library reads and writes the queues' keys as BullMQ names them; drop keyPrefix from the connections and use the prefix option of BullMQ and of forRoot instead`
      : `reaches ${apart.same === 'cluster' ? 'Redis another way (one a Redis Cluster client, the other a single server’s)' : `another Redis ${apart.same}`} than ${queue} lives on: the library's locks, dead set and reaper must use the queues' Redis (its reaper would free locks of live jobs); ${fix}`,
  );
  // A given connection that differs only in how it reaches a server (another run id, or a single server's client in
  // front of a Cluster, as a proxy is) is trusted to be the caller's choice: logged.
  return { error, fatal: !given || (apart.same !== 'server' && apart.same !== 'cluster') };
}
