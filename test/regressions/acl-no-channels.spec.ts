// Found by a hostile review (session 27): on a Redis whose application user is granted keys but no pub/sub channel
// (Redis 7's default for a new ACL user, `resetchannels`; managed services' usual setup), a delivery of an
// idempotency key held by a running job failed — its announcement to the holder (PUBLISH) was refused with NOPERM
// before it moved to delayed — and so did every retry, while the holder still ran. BullMQ needs no channel. Now the
// delivery waits all the same (for the holder's lease at most) and the warning names the ACL rule to add.
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import type { IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { deferred } from '../support/deferred.js';
import { captureLogger } from '../support/events.js';
import { hold } from '../support/gates.js';
import { PrivateRedis } from '../support/private-redis.js';
import { queueEvent } from '../support/wait.js';

// An ACL user is a server setting: this file gets a server of its own.
const server = await PrivateRedis.start();
await server.admin.call('ACL', 'SETUSER', 'app', 'reset', 'on', '>pw', '~*', 'resetchannels', '+@all');
const sharedRedisUrl = process.env.REDIS_URL;
process.env.REDIS_URL = server.url.replace('redis://', 'redis://app:pw@');
afterAll(async () => {
  process.env.REDIS_URL = sharedRedisUrl;
  await server.stop();
});

describe('a Redis user granted no pub/sub channel', () => {
  const { start } = useApps('nochan');

  it('a delivery of a key in progress waits for the holder and replays its result; the warning names the ACL rule', async () => {
    const gate = hold();
    const started = deferred();
    let effects = 0;
    const { logger, lines } = captureLogger();
    const app = await start({
      module: { logger },
      idempotency: { key: (job: IdempotencyJob<{ id: string }>) => job.data.id, lease: 5_000 },
      worker: { concurrency: 2 },
      handler: async (job: Job<{ id: string }>) => {
        effects++;
        if (job.id === 'first') {
          started.resolve();
          await gate.promise;
        }
        return { charged: job.data.id };
      },
    });
    const first = await app.queue.add('charge', { id: 'evt_1' }, { jobId: 'first' });
    await started.promise;
    // Met the key in progress: moved to delayed (not failed) while the holder runs.
    const delayed = queueEvent(app.queueEvents, 'delayed', 'second');
    const second = await app.queue.add('charge', { id: 'evt_1' }, { jobId: 'second', attempts: 1 });
    await delayed;
    gate.resolve();
    await expect(app.finished(first)).resolves.toEqual({ charged: 'evt_1' });
    await expect(app.finished(second)).resolves.toEqual({ charged: 'evt_1' });
    expect(effects).toBe(1);
    expect(lines.warn.join('\n')).toMatch(/ACL rule "&.*:waiting"/);
  });
});
