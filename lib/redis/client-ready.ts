import type { Cluster, Redis } from 'ioredis';

/**
 * Resolves at the client's next `ready`, or `end` if that comes first (closed, or its reconnections gave up: it will
 * not be ready again). Both listeners are removed once one of them fires.
 */
export function nextReadyOrEnd(client: Redis | Cluster): Promise<'ready' | 'end'> {
  return new Promise((resolve) => {
    const ready = () => {
      client.off('end', end);
      resolve('ready');
    };
    const end = () => {
      client.off('ready', ready);
      resolve('end');
    };
    client.once('ready', ready);
    client.once('end', end);
  });
}
