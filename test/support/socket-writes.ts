import { createHash } from 'node:crypto';
import { Socket } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { scriptSources, type ScriptName } from '../../lib/redis/redis-scripts.js';

/** A script's SHA and source, by which its calls are recognised in a socket write. */
function signatureOf(name: ScriptName): { sha: string; lua: string } {
  const lua = scriptSources().find((source) => source.name === name)!.lua;
  return { sha: createHash('sha1').update(lua).digest('hex'), lua };
}

/**
 * Runs `body` counting this process's socket writes that carry `acquireLock` calls (by SHA, or by source when sent as
 * EVAL): one number per write, how many calls it carried.
 */
export async function countingAcquireWrites(body: () => Promise<unknown>): Promise<number[]> {
  return (await countingScriptWrites(body, ['acquireLock'])).map((write) => write.acquireLock!);
}

/**
 * Runs `body` counting this process's socket writes that carry calls of any of `names` (by SHA, or by source when sent
 * as EVAL): one record per such write, in the order written, with how many calls of each script it carried.
 */
export async function countingScriptWrites(
  body: () => Promise<unknown>,
  names: readonly ScriptName[],
): Promise<Partial<Record<ScriptName, number>>[]> {
  const signatures = names.map((name) => ({ name, ...signatureOf(name) }));
  const count = (chunks: readonly unknown[]) => {
    const text = chunks.map(String).join('');
    const found: Partial<Record<ScriptName, number>> = {};
    for (const { name, sha, lua } of signatures) {
      const n = text.split(sha).length - 1 + text.split(lua).length - 1;
      if (n > 0) found[name] = n;
    }
    return found;
  };
  const writes: Partial<Record<ScriptName, number>>[] = [];
  const record = (found: Partial<Record<ScriptName, number>>) => {
    if (Object.keys(found).length > 0) writes.push(found);
  };
  const proto = Socket.prototype as unknown as {
    _write(chunk: unknown, encoding: string, callback: () => void): void;
    _writev(chunks: { chunk: unknown }[], callback: () => void): void;
  };
  const { _write, _writev } = proto;
  proto._write = function (this: Socket, chunk, encoding, callback) {
    record(count([chunk]));
    return _write.call(this, chunk, encoding, callback);
  };
  proto._writev = function (this: Socket, chunks, callback) {
    record(count(chunks.map((c) => c.chunk)));
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
