// A queue of a fresh library prefix that the library's queue registry does not name (other queues filled it first),
// for the tools that name a run-time lock owner's queue through that registry (inspector, admin page, reaper).
import { QUEUE_REGISTRY_LIMIT } from '../../lib/redis/queue-registry.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import type { Apps } from './apps.js';
import { byId, digestOf, runningKey, runtimeOwner, waitForParked } from './locks.js';
import { uniqueName } from './redis.js';
import { stepHandler } from './step-handler.js';

/** Fills the library's registry under `prefix` with other queues, as an application of 1,000 queues would. */
export async function fillRegistry(
  redis: { sadd(key: string, ...members: string[]): Promise<number> },
  prefix: string,
): Promise<void> {
  const names = Array.from({ length: QUEUE_REGISTRY_LIMIT }, (_, i) => `bull:${uniqueName(`s37-other-${i}`)}`);
  await redis.sadd(new UniqueJobsKeys(prefix).queueRegistry, ...names);
}

/**
 * Queue B of a fresh prefix, not in the library's registry (other queues filled it first), whose step job `jobId` is
 * parked between its steps (a while_executing lock) by `park()`, which resolves the lock's digest.
 */
export async function parkedUnregistered(apps: Pick<Apps, 'start' | 'redis'>, jobId: string) {
  const prefix = uniqueName('ujt');
  await fillRegistry(apps.redis, prefix);
  const b = await apps.start({
    module: { prefix },
    unique: { lock: 'while_executing', lockArgs: byId, jobName: 'sync' },
    handler: stepHandler([], { delayMs: 60_000 }),
  });
  return {
    prefix,
    b,
    park: async () => {
      await b.queue.add('sync', { id: 'a' }, { jobId });
      const digest = digestOf(b, 'sync', { id: 'a' });
      await waitForParked(apps.redis, runningKey(prefix, digest), runtimeOwner(b, jobId));
      return digest;
    },
  };
}
