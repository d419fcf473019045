import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';

const connections = new WeakMap<Worker, Redis | null>();

/**
 * The connection a worker records its jobs' outcomes on (BullMQ's `moveToFinished`), once known: an ioredis client to
 * a single server. `undefined` until it is known (it is asked for the first time a job runs), and for a worker on a
 * Redis Cluster, another Redis client library, or a backend other than Redis. A write sent on it before the processor
 * returns takes effect before BullMQ records the job completed or failed: one connection, one order.
 */
function workerConnection(worker: Worker | undefined): Redis | undefined {
  if (!worker) return undefined;
  const known = connections.get(worker);
  if (known !== undefined) return known ?? undefined;
  connections.set(worker, null);
  void clientOf(worker).then(
    (client) => client && connections.set(worker, client),
    () => connections.delete(worker),
  );
  return undefined;
}

/** A worker's connection ({@link workerConnection}): as known now, and once BullMQ's backend has given it. */
export interface WorkerConnectionRef {
  readonly now: Redis | undefined;
  onceKnown(): Promise<Redis | undefined>;
}

/** {@link WorkerConnectionRef} of a worker (of none: no connection). */
export function workerConnectionRef(worker: Worker | undefined): WorkerConnectionRef {
  const now = workerConnection(worker);
  return { now, onceKnown: async () => now ?? (worker && (await clientOf(worker).catch(() => undefined))) };
}

/** The ioredis client of a worker's backend to a single server, once BullMQ has it; `undefined`: another kind. */
async function clientOf(worker: Worker): Promise<Redis | undefined> {
  const client = await Promise.resolve((worker.getBackend() as { client?: Promise<unknown> }).client);
  const ioredis = client as (Redis & { __bullmq_iredis?: boolean }) | undefined;
  return ioredis?.__bullmq_iredis === true && !ioredis.isCluster ? ioredis : undefined;
}
