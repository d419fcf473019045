import { createHash } from 'node:crypto';
import { Socket } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { scriptSources } from '../../lib/redis/redis-scripts.js';

const acquireLua = scriptSources().find((source) => source.name === 'acquireLock')!.lua;
const acquireSha = createHash('sha1').update(acquireLua).digest('hex');

/**
 * Runs `body` counting this process's socket writes that carry `acquireLock` calls (by SHA, or by source when sent as
 * EVAL): one number per write, how many calls it carried.
 */
export async function countingAcquireWrites(body: () => Promise<unknown>): Promise<number[]> {
  const acquiresIn = (chunks: readonly unknown[]) =>
    chunks.reduce<number>((n, chunk) => {
      const text = String(chunk);
      return n + text.split(acquireSha).length - 1 + text.split(acquireLua).length - 1;
    }, 0);
  const writes: number[] = [];
  const proto = Socket.prototype as unknown as {
    _write(chunk: unknown, encoding: string, callback: () => void): void;
    _writev(chunks: { chunk: unknown }[], callback: () => void): void;
  };
  const { _write, _writev } = proto;
  proto._write = function (this: Socket, chunk, encoding, callback) {
    const n = acquiresIn([chunk]);
    if (n > 0) writes.push(n);
    return _write.call(this, chunk, encoding, callback);
  };
  proto._writev = function (this: Socket, chunks, callback) {
    const n = acquiresIn(chunks.map((c) => c.chunk));
    if (n > 0) writes.push(n);
    return _writev.call(this, chunks, callback);
  };
  try {
    await body();
    return writes;
  } finally {
    Object.assign(proto, { _write, _writev });
  }
}

/** The sockets of a client: its own, or every node's on a Cluster. */
export function socketsOf(client: Redis | Cluster): (Socket & { writableCorked: number })[] {
  const nodes: Redis[] = client.isCluster ? (client as Cluster).nodes('all') : [client as Redis];
  return nodes.flatMap((node) => {
    const stream = (node as unknown as { stream?: Socket & { writableCorked: number } }).stream;
    return stream ? [stream] : [];
  });
}
