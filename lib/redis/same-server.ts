import type { Cluster, Redis } from 'ioredis';
import { within } from '../common/within.js';

/** A server's identity as a client sees it: its run id, the client's database and key prefix. */
interface Identity {
  readonly runId: string;
  readonly db: number;
  readonly keyPrefix: string;
}

const identities = new WeakMap<Redis, Promise<Identity | undefined>>();
const answers = new WeakMap<Redis | Cluster, WeakMap<Redis, boolean>>();

/**
 * Whether `a` and `b` are known to reach the same Redis server and database (one `INFO server` per client, asked the
 * first time and answered from then on). `false` while the answer is unknown, for a cluster client (two keys of one
 * call may live on two masters), and when asking failed (asked again next time): a caller that needs the two
 * connections on one server falls back to not relying on it.
 */
export function knownOnSameServer(a: Redis | Cluster, b: Redis): boolean {
  if (a === b) return true;
  if (a.isCluster) return false;
  let known = answers.get(a);
  if (!known) answers.set(a, (known = new WeakMap()));
  const answer = known.get(b);
  if (answer !== undefined) return answer;
  known.set(b, false);
  void Promise.all([identityOf(a as Redis), identityOf(b)]).then(([ia, ib]) => {
    if (ia === undefined || ib === undefined) known.delete(b);
    else known.set(b, apartIn(ia, ib) === undefined);
  });
  return false;
}

/**
 * {@link knownOnSameServer}, waiting for the answer while it is not in yet (the identities are asked once per client
 * and kept; a failed ask is asked again later): `false` for a cluster client and when either could not answer.
 */
export async function onSameServer(a: Redis | Cluster, b: Redis): Promise<boolean> {
  if (knownOnSameServer(a, b)) return true;
  if (a.isCluster) return false;
  const [ia, ib] = await Promise.all([identityOf(a as Redis), identityOf(b)]);
  return ia !== undefined && ib !== undefined && apartIn(ia, ib) === undefined;
}

/**
 * How two connections differ: another server (run id), another database, another ioredis `keyPrefix`, or one a Redis
 * Cluster client and the other a single server's (`cluster`).
 */
export type Apart = 'server' | 'database' | 'keyPrefix' | 'cluster';

/**
 * Whether `library` and the client `other` resolves to (a BullMQ backend's, an ioredis client) reach the same Redis
 * server and database: `true`; what differs ({@link Apart}) only when both answered and differ, or `cluster` when one
 * is a Redis Cluster client and the other not; `undefined` when either did not answer within `withinMs` (a Redis out of
 * reach at bootstrap), for two cluster clients (not compared), or when `other` is not an ioredis client.
 */
export async function sameServerWithin(
  library: Redis | Cluster,
  other: Promise<unknown>,
  withinMs: number,
): Promise<true | Apart | undefined> {
  const compare = async () => {
    const client = (await other) as Partial<Redis> | undefined;
    if (client === library) return true;
    if (typeof client?.info !== 'function' || !client.options) return undefined;
    if (Boolean(library.isCluster) !== Boolean(client.isCluster)) return 'cluster';
    if (library.isCluster) return undefined;
    // Asked afresh (a run id changes when the server restarts), and once more when they differ: a restart between the
    // two answers (a server coming back while the application boots) must not look like two servers.
    for (let round = 0; ; round++) {
      const [a, b] = await Promise.all([askIdentity(library as Redis), askIdentity(client as Redis)]);
      if (a === undefined || b === undefined) return undefined;
      const apart = apartIn(a, b);
      if (apart === undefined) return true;
      if (round === 1) return apart;
    }
  };
  return within(compare(), withinMs);
}

/** What differs between two identities (see {@link askIdentity}); `undefined`: nothing. */
function apartIn(a: Identity, b: Identity): Apart | undefined {
  if (a.runId !== b.runId) return 'server';
  if (a.db !== b.db) return 'database';
  return a.keyPrefix === b.keyPrefix ? undefined : 'keyPrefix';
}

/**
 * The identity `client` sees now (`INFO server`, and `CLIENT INFO` for the database it is on: a `SELECT` after it
 * connected moves it from its options' `db`; Redis 6.2+, else the options say); `undefined` when it cannot be asked or
 * says no run id.
 */
async function askIdentity(client: Redis): Promise<Identity | undefined> {
  const [info, self] = await Promise.all([
    client.info('server').catch(() => undefined),
    client.call('CLIENT', 'INFO').catch(() => undefined),
  ]);
  const runId = info === undefined ? undefined : /^run_id:(\w+)/m.exec(info)?.[1];
  if (runId === undefined) return undefined;
  const selected = typeof self === 'string' ? /(?:^| )db=(\d+)/.exec(self)?.[1] : undefined;
  // The key prefix too: a client with an ioredis `keyPrefix` names other keys than one without.
  const { db, keyPrefix } = client.options;
  return { runId, db: Number(selected ?? db ?? 0), keyPrefix: keyPrefix ?? '' };
}

function identityOf(client: Redis): Promise<Identity | undefined> {
  let identity = identities.get(client);
  if (!identity) {
    identity = askIdentity(client);
    identities.set(client, identity);
    // A failed or inconclusive answer (no connection yet, INFO not allowed to this user) is asked again a minute later,
    // not on every job.
    void identity.then((value) => value === undefined && setTimeout(() => identities.delete(client), RETRY_MS).unref());
  }
  return identity;
}

const RETRY_MS = 60_000;
