import type { Cluster, Redis } from 'ioredis';

interface CorkableStream {
  readonly writable?: boolean;
  cork(): void;
  uncork(): void;
}

/** The sockets of `client` that are connected and writable: its own, or each master's on a Redis Cluster. */
function socketsOf(client: Redis | Cluster): CorkableStream[] {
  const nodes: Redis[] = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
  const sockets: CorkableStream[] = [];
  for (const node of nodes) {
    const stream = (node as unknown as { stream?: Partial<CorkableStream> }).stream;
    if (
      node.status === 'ready' &&
      stream?.writable === true &&
      typeof stream.cork === 'function' &&
      typeof stream.uncork === 'function'
    ) {
      sockets.push(stream as CorkableStream);
    }
  }
  return sockets;
}

/**
 * Runs `send`, which sends commands on `client` without waiting for their answers, with the client's sockets corked:
 * the commands leave in one socket write per server instead of one each (a system call each on both sides: for a bulk
 * of 100 slot acquires, 0.3–1 ms less CPU per bulk in the producer and in Redis each; docs/performance.md). They are
 * written in the order they were sent, when `send` returns or throws, in the same tick: nothing waits longer for it.
 * A client not connected yet (its commands wait in ioredis' offline queue) sends as it would have, and so does one
 * with ioredis' `enableAutoPipelining` (its commands leave on the next tick, batched by ioredis itself).
 */
export function writingTogether<T>(client: Redis | Cluster, send: () => T): T {
  const sockets = socketsOf(client);
  for (const socket of sockets) socket.cork();
  try {
    return send();
  } finally {
    for (const socket of sockets) socket.uncork();
  }
}
