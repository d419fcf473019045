import 'reflect-metadata';
import { getQueueToken } from '@nestjs/bullmq';
import { NestFactory } from '@nestjs/core';
import { QueueEvents, type Queue } from 'bullmq';
import { UniqueJobsService } from 'nestjs-unique-jobs';
import { AppModule, redisConnection } from './app.module.js';
import { PaymentsService } from './payments/payments.service.js';
import type { PaymentEvent } from './payments/settle-payment.job.js';
import { WebhooksService } from './payments/webhooks.service.js';

/**
 * The demo: replays the seed's webhook story against the app and prints what happened. Exits 0 only if every
 * expectation held.
 */
async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
  const queue = app.get<Queue>(getQueueToken('payments'));
  await queue.obliterate({ force: true });
  const events = new QueueEvents('payments', { connection: redisConnection() });
  await events.waitUntilReady();
  const webhooks = app.get(WebhooksService);
  const payments = app.get(PaymentsService);
  const uniqueJobs = app.get(UniqueJobsService);
  for (const entry of await uniqueJobs.deadSet.list({ limit: 1000 })) await uniqueJobs.deadSet.delete(entry.id);

  const event = (id: string, amount: number): PaymentEvent => ({
    id,
    type: 'payment.settled',
    data: { amount, currency: 'EUR', receivedAt: new Date().toISOString() },
  });
  const rows: { scenario: string; expected: string; observed: string; ok: boolean }[] = [];
  const check = (scenario: string, expected: string, observed: string) =>
    rows.push({ scenario, expected, observed, ok: expected === observed });

  // 1 + 2: evt_123 delivered, re-delivered 5 times while its job works; evt_456 at the same time.
  console.log('Delivering evt_123 once, then 5 more times while it is settling, and evt_456 alongside…');
  const first = await webhooks.receive(event('evt_123', 4200));
  const other = await webhooks.receive(event('evt_456', 990));
  const redeliveries = await Promise.all([1, 2, 3, 4, 5].map(() => webhooks.receive(event('evt_123', 4200))));
  const duplicates = redeliveries.filter((r) => r.status === 'duplicate');
  if (first.status !== 'enqueued' || other.status !== 'enqueued') throw new Error('first deliveries were not enqueued');
  await Promise.all([first.job.waitUntilFinished(events), other.job.waitUntilFinished(events)]);
  const rejected = await uniqueJobs.deadSet.list({ limit: 100 });
  check('1. evt_123 + 5 re-deliveries mid-job', '1 job, 5 duplicates', `1 job, ${duplicates.length} duplicates`);
  check(
    '1. rejected duplicates in the dead set',
    '5',
    String(rejected.filter((e) => e.digest === first.digest).length),
  );
  check(
    '2. evt_456 at the same time',
    'settled',
    payments.list().some((p) => p.eventId === 'evt_456') ? 'settled' : 'missing',
  );

  // 3: after evt_123 completed, a late re-delivery runs again and changes nothing.
  console.log('Re-delivering evt_123 after it completed…');
  const late = await webhooks.receive(event('evt_123', 4200));
  if (late.status !== 'enqueued') throw new Error('the late re-delivery was not enqueued');
  await late.job.waitUntilFinished(events);
  const settled = payments.list().filter((p) => p.eventId === 'evt_123');
  check('3. late re-delivery after completion', 'ran, 1 payment', `ran, ${settled.length} payment`);
  check('3. settle() calls on evt_123 (idempotent)', '2', String(settled[0]?.settleCalls ?? 0));

  console.table(rows.map(({ ok, ...row }) => ({ ...row, result: ok ? 'ok' : 'FAILED' })));
  await events.close();
  await app.close();
  const failed = rows.filter((row) => !row.ok).length;
  console.log(failed === 0 ? 'Every expectation held.' : `${failed} expectation(s) failed.`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
