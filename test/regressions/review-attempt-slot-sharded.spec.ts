// Review of session 46 (helper-146; releaseAttemptSlot-2.lua): the checked release of a general-path slot is the
// library's first script naming a library key and a BullMQ key (the job's lock) together. A server that refuses keys of
// two hash slots in one call while looking like one server to the client (a proxy in front of shards: Redis Enterprise
// or Azure with a non-OSS cluster policy, Envoy) answers it CROSSSLOT; every release would then fail and leave its slot
// to the reaper, where one ZREM used to work. Such a connection now falls back to one ZREM, at once and from then on.
// The proxy is played by one cluster-mode node holding every slot, reached by a plain (non-cluster) client.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { LockStore } from '../../lib/locks/lock-store.js';
import { RedisScripts } from '../../lib/redis/redis-scripts.js';
import { PrivateRedis } from '../support/private-redis.js';
import { waitFor } from '../support/wait.js';

describe('review: the checked slot release on a server refusing keys of two slots', () => {
  let server: PrivateRedis;
  let client: Redis;

  beforeAll(async () => {
    server = await PrivateRedis.start({ clusterEnabled: true });
    await server.admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    await waitFor('the one-node cluster to take writes', async () =>
      String(await server.admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
    );
    client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await client?.quit();
    await server?.stop();
  });

  const evalCalls = async () =>
    Number(/cmdstat_eval:calls=(\d+)/.exec(await server.admin.info('commandstats'))?.[1] ?? 0);

  it('falls back to one ZREM, and sends no script on that connection again', async () => {
    const store = new LockStore(new RedisScripts(client));
    const key = `uj:{v1:${'ab'.repeat(32)}}:queued`;
    const jobLock = 'bull:sharded:7:lock';
    await client.set(jobLock, 'token-7');

    expect((await store.acquireSlot(key, '7', 60_000, 2, 'new')).acquired).toBe(true);
    await expect(client.eval('return 1', 2, key, jobLock)).rejects.toThrow(/CROSSSLOT/); // what the server does
    expect(await store.releaseAttemptSlot(key, jobLock, '7', 'token-7', client)).toBe(true);
    expect(await client.zcard(key)).toBe(0);

    expect((await store.acquireSlot(key, '7', 60_000, 2, 'new')).acquired).toBe(true);
    const before = await evalCalls();
    expect(await store.releaseAttemptSlot(key, jobLock, '7', 'token-7', client)).toBe(true);
    expect(await client.zcard(key)).toBe(0);
    expect(await evalCalls()).toBe(before); // remembered: no script tried
    await client.flushall();
  });
});
