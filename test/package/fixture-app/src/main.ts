// Boots the app, delivers webhook evt_123 three times (twice through queue.add, once through UniqueJobsService.enqueue)
// while its job is held, lets the job run, then closes the app and prints one line `RESULT {json}` for
// test/package/pack-install.spec.ts. It does not call process.exit: the process ends only if app.close() left nothing
// open.
import 'reflect-metadata';
import { getQueueToken } from '@nestjs/bullmq';
import { NestFactory } from '@nestjs/core';
import type { Queue } from 'bullmq';
import { UniqueJobsService } from 'nestjs-unique-jobs';
import { expectLocked, expectNotLocked, waitForUniqueJobEvent, wasDeduplicated } from 'nestjs-unique-jobs/testing';
import { AppModule } from './app.module.js';
import { PaymentsService } from './payments.service.js';
import { WebhooksService } from './webhooks.service.js';

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
const webhooks = app.get(WebhooksService);
const payments = app.get(PaymentsService);
const uniqueJobs = app.get(UniqueJobsService);
const queue = app.get<Queue>(getQueueToken('payments'));

const event = { id: 'evt_123', data: { amount: 4200, currency: 'EUR' } };
const data = { eventId: event.id, payload: event.data };

const job = await webhooks.receive(event);
const jobId = job.id!;
const locked = await expectLocked(app, 'payments', 'settle', data, { holder: jobId });
const unlocked = waitForUniqueJobEvent(app, 'unlocked', (e) => e.jobId === jobId, 20_000);

// Delivered again while its job is queued or held: the payload differs, the event id decides.
const again = await webhooks.receive({ id: event.id, data: { amount: 4300, currency: 'EUR' } });
const explicit = await webhooks.receiveExplicitly(event);

payments.release();
await unlocked;
await expectNotLocked(app, 'payments', 'settle', data);

const result = {
  jobId,
  digest: locked.digest,
  again: { id: again.id },
  explicit,
  explicitWasDeduplicated: wasDeduplicated(explicit),
  state: await job.getState(),
  returnValue: (await queue.getJob(jobId))?.returnvalue as unknown,
  calls: payments.calls,
  deadSet: (await uniqueJobs.deadSet.list()).map(({ existingJobId, digest }) => ({ existingJobId, digest })),
};
await app.close();
console.log(`RESULT ${JSON.stringify(result)}`);
