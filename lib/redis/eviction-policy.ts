import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';

/** The one `maxmemory-policy` under which Redis never deletes a key to make room. */
const NO_EVICTION = 'noeviction';

/**
 * Logs an error when the library's Redis evicts keys at `maxmemory` (any `maxmemory-policy` but `noeviction`): an
 * evicted lock admits a duplicate, an evicted idempotency record runs an effect again. Under `volatile-*` policies the
 * library's keys are the first to go (they have TTLs, BullMQ's do not). Read from `INFO memory` (allowed where
 * `CONFIG` is not; on a Cluster, each master's); a Redis out of reach, or a user refused `INFO`, is not asked again.
 * Never throws.
 */
export async function warnIfEvicting(client: Redis | Cluster, logger: LoggerLike): Promise<void> {
  const servers: (Redis | Cluster)[] = client.isCluster ? (client as Cluster).nodes('master') : [client];
  const policies = await Promise.all(servers.map((server) => server.info('memory').then(policyIn, () => undefined)));
  const policy = policies.find((found) => found !== undefined && found !== NO_EVICTION);
  if (policy === undefined) return;
  logger.error(
    `Redis evicts keys when full (maxmemory-policy ${policy}): a lock or idempotency record it evicts lets a duplicate job in or an effect run again${policy.startsWith('volatile-') ? ' (under a volatile-* policy the library’s keys, which have TTLs, are evicted first)' : ''}; set maxmemory-policy ${NO_EVICTION}, as BullMQ requires too`,
  );
}

/** The `maxmemory_policy` an `INFO memory` answer names. */
function policyIn(info: string): string | undefined {
  return /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
}
