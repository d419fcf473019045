// Review repro: the orphan reaper releases a general-path enqueue lock whose job is WAITING, because the job lives in a
// queue under a BullMQ prefix the leader does not know (another app sharing the library prefix, or the CLI run with
// the default --bull-prefix). The lock names only the owner job id; "not found in the queues I know" is read as "gone".
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { OrphanReaper } from '../../lib/index.js';
import { queuedKey } from '../support/locks.js';
import { deleteKeys, redisClient, redisOptions, scanKeys, uniqueName } from '../support/redis.js';

describe('review: reaper and queues it does not know', () => {
  let redis: Redis;
  beforeAll(() => (redis = redisClient()));
  afterAll(() => redis.quit());

  it('keeps the general-path lock of a waiting job in a queue under another BullMQ prefix', async () => {
    const prefix = uniqueName('ujrev'); // the library prefix both apps share
    const otherBullPrefix = uniqueName('payments'); // app B: BullModule.forRoot({ prefix: 'payments-…' })
    const queue = new Queue(uniqueName('charges'), { connection: redisOptions(), prefix: otherBullPrefix });
    const lock = queuedKey(prefix, 'v1:' + 'b'.repeat(64));
    try {
      // App B's general-path enqueue (lockLimit > 1): lock taken (24 h lease), then the job added; it waits.
      await redis.zadd(lock, Date.now() + 86_400_000, 'job-b-1');
      await queue.add('charge', { id: 1 }, { jobId: 'job-b-1' });
      // App A is the reaper leader; it knows only its own queue under BullMQ's default prefix.
      const reaper = new OrphanReaper({
        client: redis,
        prefix,
        queues: () => [{ name: uniqueName('emails'), prefix: 'bull' }],
        options: { grace: 0 },
      });
      const report = await reaper.run();
      await reaper.resign();
      expect(await queue.getJobState('job-b-1')).toBe('waiting');
      expect(report.reaped.enqueueLocks).toBe(0);
      expect(await redis.zrange(lock, 0, -1)).toEqual(['job-b-1']);
    } finally {
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      await deleteKeys(redis, await scanKeys(redis, `${prefix}:*`));
    }
  });
});
