// Queues guarded with `uniqueJobs.guardQueue(queue)` and closed afterwards are not kept for the life of the process.
// The guard remembered every queue it ever guarded, by qualified name: an application that opens short-lived queues of
// many names (a queue per tenant, closed after use) kept each closed queue with its connection's objects, ~105 KB
// apiece (2,000 guarded, one job each, closed: heap 19.7 MB → 230.7 MB; now 27.2 MB), and every `digestOf` call and
// metrics scrape walked them all. (On one ioredis instance shared by the queues, BullMQ itself keeps each closed queue
// through the listeners it leaves on the connection: not the library's, so the queues here have their own.)
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { startApp, type TestApp } from '../support/app.js';
import { bullOptions, bullPrefix, uniqueName } from '../support/redis.js';

v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const QUEUES = 300;

let app: TestApp;
beforeAll(async () => {
  app = await startApp({ queue: uniqueName('bounds-gq') });
});
afterAll(async () => {
  await app.close();
});

describe('bounds: queues guarded by hand and closed', () => {
  it('are forgotten by the guard', async () => {
    const refs: WeakRef<Queue>[] = [];
    const tenant = uniqueName('bounds-tenant');
    for (let i = 0; i < QUEUES; i++) {
      const queue = app.service.guardQueue(
        new Queue(`${tenant}-${i}`, { connection: bullOptions().connection, prefix: bullPrefix() }),
      );
      refs.push(new WeakRef(queue));
      await queue.close();
    }
    // One more, still open: guarded as before.
    const open = app.service.guardQueue(
      new Queue(`${tenant}-open`, { connection: bullOptions().connection, prefix: bullPrefix() }),
    );
    try {
      await sleep(0); // WeakRef targets are kept until the end of the job that made them
      gc();
      expect(refs.filter((ref) => ref.deref() !== undefined).length).toBeLessThan(QUEUES / 2);
      expect(app.service.digestOf(open, 'any', {})).toBeUndefined(); // not a unique job: the guard still answers
    } finally {
      await open.close();
    }
  });
});
