// @UniqueJob and @IdempotencyKey on a base class apply to the @Processor subclasses that extend it (found in review:
// the options were read from the subclass only, so a decorated base class was silently ignored).
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import { QueueEvents, type Job, type Queue } from 'bullmq';
import {
  IdempotencyKey,
  UniqueJob,
  UniqueJobsModule,
  UniqueJobsService,
  type IdempotencyJob,
} from '../../lib/index.js';
import { redisClient, openQueueEvents, redisOptions, scanKeys, uniqueName } from '../support/redis.js';

describe('decorators on a base class', () => {
  const prefix = uniqueName('ujinh');
  let moduleRef: TestingModule | undefined;
  let events: QueueEvents | undefined;
  afterEach(async () => {
    await moduleRef?.close();
    await events?.close();
    const redis = redisClient();
    const keys = await scanKeys(redis, `${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });

  it('apply to its @Processor subclass', async () => {
    const queueName = uniqueName('inherited');
    let effects = 0;
    // The first job runs only once the second enqueue was answered: that enqueue must meet it queued or running.
    let release!: () => void;
    const running = new Promise<void>((resolve) => (release = resolve));

    @UniqueJob({ lock: 'until_executed', lockArgs: (data: { id: string }) => data.id })
    @IdempotencyKey((job: IdempotencyJob<{ id: string }>) => job.data.id)
    abstract class ChargeBase extends WorkerHost {
      async process(job: Job<{ id: string }>) {
        await running;
        effects++;
        return `charged ${job.data.id}`;
      }
    }

    @Processor(queueName)
    class ChargeProcessor extends ChargeBase {}

    moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, prefix }),
      ],
      providers: [ChargeProcessor],
    }).compile();
    await moduleRef.init();
    const queue = moduleRef.get<Queue>(getQueueToken(queueName));
    events = await openQueueEvents(queueName);
    await events.waitUntilReady();
    const service = moduleRef.get(UniqueJobsService);

    const first = await queue.add('charge', { id: 'o1' });
    // The lock applies: a second enqueue while the first is queued or running is a duplicate.
    const second = await service.enqueue(queue, 'charge', { id: 'o1' });
    release();
    expect(second).toMatchObject({ status: 'duplicate' });
    expect(await first.waitUntilFinished(events)).toBe('charged o1');
    // Idempotency applies: a later delivery replays without running.
    const again = await queue.add('charge', { id: 'o1' });
    expect(await again.waitUntilFinished(events)).toBe('charged o1');
    expect(effects).toBe(1);
    await queue.obliterate({ force: true });
  });

  it('a base class keeps its options for job names its subclass does not cover (hostile review of issue 16)', async () => {
    const queueName = uniqueName('inherited');
    const byId = (data: { id: string }) => data.id;

    @UniqueJob({ jobName: 'base', lock: 'until_executed', lockArgs: byId })
    abstract class Base extends WorkerHost {
      async process(): Promise<string> {
        return 'done';
      }
    }

    @Processor(queueName, { autorun: false })
    @UniqueJob({ jobName: 'sub', lock: 'while_executing', lockArgs: byId })
    class Sub extends Base {}

    moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: redisOptions() }),
        BullModule.registerQueue({ name: queueName }),
        UniqueJobsModule.forRoot({ logger: false, prefix }),
      ],
      providers: [Sub],
    }).compile();
    await moduleRef.init();
    const queue = moduleRef.get<Queue>(getQueueToken(queueName));
    const service = moduleRef.get(UniqueJobsService);
    // Before: the subclass's own @UniqueJob shadowed the base's, so 'base' jobs were not unique at all.
    expect(service.digestOf(queueName, 'base', { id: 'b' })).toBeDefined();
    expect(service.digestOf(queueName, 'sub', { id: 'b' })).toBeDefined();
    expect(await service.enqueue(queue, 'base', { id: 'b' })).toMatchObject({ status: 'enqueued' });
    expect(await service.enqueue(queue, 'base', { id: 'b' })).toMatchObject({ status: 'duplicate' });
    await queue.obliterate({ force: true });
  });
});
