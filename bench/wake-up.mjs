// Wake-up latency of a duplicate delivery (issue 13 §2): a job meets its idempotency key in progress (another job
// holds it), moves itself to delayed and waits; the time measured runs from the holder's handler returning to the
// duplicate's completion (it replays the stored result). Without the wake-up it would wait out the holder's lease
// (here ten minutes). Reported as p50/p99 over `samples` keys, each with its own holder and duplicate.
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyKey, UniqueJobsModule, UniqueJobsService } from '../dist/index.js';

/** Measures the wake-up; resolves `{ samples, latencies }` (milliseconds). */
export async function measureWakeUp({ connection, prefix, queueName, samples }) {
  const started = new Map();
  const release = new Map();
  class WakeProcessor extends WorkerHost {
    async process(job) {
      if (job.data.role !== 'holder') return undefined; // a duplicate that runs would be a bug: it must replay
      await new Promise((resolve) => {
        release.set(job.data.key, resolve);
        started.get(job.data.key)?.();
      });
      return { by: job.id };
    }
  }
  Processor(queueName, { concurrency: 4 })(WakeProcessor);
  IdempotencyKey({ key: (job) => job.data.key, lease: 10 * 60_000, fingerprint: false })(WakeProcessor);
  class WakeApp {}
  Module({
    imports: [
      BullModule.forRoot({ connection }),
      BullModule.registerQueue({ name: queueName }),
      UniqueJobsModule.forRoot({ logger: false, prefix }),
    ],
    providers: [WakeProcessor],
  })(WakeApp);
  const app = await NestFactory.createApplicationContext(WakeApp, { logger: false });
  const queue = app.get(getQueueToken(queueName));
  const worker = app.get(WakeProcessor).worker;
  const waiting = new Map();
  const subscription = app.get(UniqueJobsService).events$.subscribe((event) => {
    if (event.type === 'idempotencyInProgress') waiting.get(event.jobId)?.();
  });
  const completed = new Map();
  worker.on('completed', (job) => completed.get(job.id)?.());
  const latencies = [];
  try {
    for (let i = 0; i < samples; i++) {
      const key = `wake-${i}`;
      const holderStarted = new Promise((resolve) => started.set(key, resolve));
      await queue.add('w', { key, role: 'holder' });
      await holderStarted;
      const duplicate = await queue.add('w', { key, role: 'duplicate' });
      const duplicateWaits = new Promise((resolve) => waiting.set(duplicate.id, resolve));
      const duplicateDone = new Promise((resolve) => completed.set(duplicate.id, resolve));
      await duplicateWaits;
      // The duplicate announced itself just before moving to delayed: let it get there, as a real holder would.
      await waitUntil(async () => (await duplicate.getState()) === 'delayed');
      const t0 = performance.now();
      release.get(key)();
      await duplicateDone;
      latencies.push(performance.now() - t0);
      const replayed = await queue.getJob(duplicate.id);
      if (replayed.returnvalue?.by === undefined) throw new Error(`wake-up bench: duplicate ${duplicate.id} ran`);
    }
  } finally {
    subscription.unsubscribe();
    await worker.close();
    await queue.obliterate({ force: true });
    await app.close();
  }
  return { samples, latencies };
}

/** Polls a condition (a job's state, which BullMQ publishes no event for on this path) every 2 ms, 10 s at most. */
async function waitUntil(condition) {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error('wake-up bench: the duplicate never reached delayed');
}
