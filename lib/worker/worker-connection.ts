import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';

const connections = new WeakMap<Worker, Redis | null>();

/**
 * The connection a worker records its jobs' outcomes on (BullMQ's `moveToFinished`), once known: an ioredis client to
 * a single server. `undefined` until it is known (it is asked for the first time a job runs), and for a worker on a
 * Redis Cluster, another Redis client library, or a backend other than Redis. A write sent on it before the processor
 * returns takes effect before BullMQ records the job completed or failed: one connection, one order.
 */
export function workerConnection(worker: Worker | undefined): Redis | undefined {
  if (!worker) return undefined;
  const known = connections.get(worker);
  if (known !== undefined) return known ?? undefined;
  connections.set(worker, null);
  const backend = worker.getBackend() as { client?: Promise<unknown> };
  void Promise.resolve(backend.client).then(
    (client) => {
      const ioredis = client as (Redis & { __bullmq_iredis?: boolean }) | undefined;
      if (ioredis?.__bullmq_iredis === true && !ioredis.isCluster) connections.set(worker, ioredis);
    },
    () => connections.delete(worker),
  );
  return undefined;
}
