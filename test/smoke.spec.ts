import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { deferred } from './support/deferred.js';
import { startApp, type TestApp } from './support/app.js';
import { lockKeys, redisClient, uniqueName } from './support/redis.js';

describe('smoke', () => {
  let app: TestApp | undefined;
  const redis = redisClient();
  afterEach(async () => app?.close());
  afterAll(async () => redis.quit());

  it('until_executed: a duplicate while running is dropped, the lock goes when the job completes', async () => {
    const gate = deferred();
    const started = deferred();
    const queueName = uniqueName('smoke');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id },
      handler: async () => {
        started.resolve();
        await gate.promise;
        return 'done';
      },
    });
    const first = await app.service.enqueue(app.queue, 'settle', { id: 'evt_1', n: 1 });
    expect(first.status).toBe('enqueued');
    await started.promise;
    const second = await app.service.enqueue(app.queue, 'settle', { id: 'evt_1', n: 2 });
    expect(second).toMatchObject({ status: 'duplicate', strategy: 'log' });
    if (first.status !== 'enqueued' || second.status !== 'duplicate') throw new Error('unexpected');
    expect(second.existingJobId).toBe(first.job.id);
    expect(await lockKeys(redis, app.prefix, queueName)).toHaveLength(1);
    gate.resolve();
    await expect(app.finished(first.job)).resolves.toBe('done');
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
    expect(app.runs).toHaveLength(1);
  });
});
