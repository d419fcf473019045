// OpenTelemetry spans with a real SDK: a BasicTracerProvider with an InMemorySpanExporter registered globally (and the
// AsyncLocalStorage context manager), then real jobs. Asserts the spans, their parent links and attributes, and that
// no job data, idempotency key, job id or error message ever reaches an attribute.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { context, SpanStatusCode, trace, type AttributeValue } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import type { Job } from 'bullmq';
import { EventLog } from '../support/events.js';
import { byId, digestOf } from '../support/locks.js';
import { asTestApp, useObservedApps } from './helpers.js';

const SECRET_ID = 'customer-42@example.com';
const SECRET_KEY = 'idem-SECRET-9f31';

/** Every attribute value of a span and of its events. */
function attributeValues(span: ReadableSpan): AttributeValue[] {
  return [span.attributes, ...span.events.map((event) => event.attributes ?? {})].flatMap((attributes) =>
    Object.values(attributes).filter((value): value is AttributeValue => value !== undefined),
  );
}

describe('tracing with @opentelemetry/api', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const { start } = useObservedApps('tracing');
  const spans = (name: string) => exporter.getFinishedSpans().filter((span) => span.name === name);

  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
  });
  beforeEach(() => exporter.reset());
  afterAll(async () => {
    trace.disable();
    context.disable();
    await provider.shutdown();
  });

  it('traces a unique enqueue and its duplicate, and the process span with its run-time lock and idempotency children', async () => {
    // The worker starts once both adds are answered: until_and_while_executing lets its enqueue lock go as the job
    // starts, so a worker quick to take the first job would make the second add a new job, not a duplicate.
    const app = await start({
      paused: true,
      unique: { lock: 'until_and_while_executing', jobName: 'pay', lockArgs: byId },
      idempotency: { jobName: 'pay', scope: 'payments', key: (job) => (job.data as { key: string }).key },
      handler: async () => 'paid',
    });
    const log = new EventLog(asTestApp(app));
    const data = { id: SECRET_ID, key: SECRET_KEY };
    const digest = digestOf(asTestApp(app), 'pay', data);
    const job = await app.queue.add('pay', data);
    const duplicate = await app.queue.add('pay', data);
    void app.processor!.worker.run();
    expect(await app.finished(job)).toBe('paid');
    await log.next((e) => e.type === 'unlocked' && e.lock === 'runtime');

    const enqueues = spans('unique-jobs enqueue');
    expect(enqueues.map((span) => span.attributes)).toEqual([
      expect.objectContaining({
        'messaging.system': 'bullmq',
        'messaging.destination.name': app.queue.name,
        'unique_jobs.job_name': 'pay',
        'unique_jobs.lock': 'until_and_while_executing',
        'unique_jobs.digest': digest,
        'unique_jobs.outcome': 'enqueued',
      }),
      expect.objectContaining({
        'unique_jobs.digest': digest,
        'unique_jobs.outcome': 'duplicate',
        'unique_jobs.strategy': 'log',
      }),
    ]);
    expect(enqueues[0].events.map((event) => event.name)).toEqual(['unique-jobs.locked']);
    expect(enqueues[1].events.map((event) => event.name)).toEqual(['unique-jobs.duplicate']);

    const [process] = spans('unique-jobs process');
    expect(process.attributes).toMatchObject({
      'messaging.destination.name': app.queue.name,
      'unique_jobs.job_name': 'pay',
      'unique_jobs.lock': 'until_and_while_executing',
      'unique_jobs.digest': digest,
    });
    expect(process.status.code).toBe(SpanStatusCode.UNSET);
    // The run-time lock taken, the enqueue lock let go as the job starts, the run-time lock released.
    expect(process.events.map((event) => [event.name, event.attributes?.['unique_jobs.lock.kind']])).toEqual([
      ['unique-jobs.locked', 'runtime'],
      ['unique-jobs.unlocked', 'enqueue'],
      ['unique-jobs.unlocked', 'runtime'],
    ]);
    const processId = process.spanContext().spanId;

    const [lock] = spans('unique-jobs runtime lock');
    expect(lock.parentSpanContext?.spanId).toBe(processId);
    expect(lock.attributes).toMatchObject({ 'unique_jobs.digest': digest, 'unique_jobs.lock.acquired': true });

    const [idempotency] = spans('unique-jobs idempotency');
    expect(idempotency.parentSpanContext?.spanId).toBe(processId);
    expect(idempotency.attributes).toMatchObject({
      'unique_jobs.idempotency.scope': 'payments',
      'unique_jobs.idempotency.store': 'redis',
    });
    expect(idempotency.events.map((event) => event.name)).toEqual([
      'unique-jobs.idempotencyClaimed',
      'unique-jobs.idempotencyCompleted',
    ]);

    const values = exporter.getFinishedSpans().flatMap(attributeValues).map(String);
    for (const secret of [SECRET_ID, SECRET_KEY, 'customer-42', 'SECRET']) {
      expect(values.filter((value) => value.includes(secret))).toEqual([]);
    }
    expect(values).not.toContain(job.id);
    expect(values).not.toContain(duplicate.id);
  });

  it('marks a failed process span with the error class only, never its message', async () => {
    const app = await start({
      unique: { lock: 'while_executing', lockArgs: byId },
      handler: async (job: Job) => {
        throw new TypeError(`card of ${(job.data as { id: string }).id} declined`);
      },
    });
    const job = await app.queue.add('charge', { id: SECRET_ID });
    await expect(app.finished(job)).rejects.toThrow('declined');
    const [process] = spans('unique-jobs process');
    expect(process.status.code).toBe(SpanStatusCode.ERROR);
    expect(process.status.message).toBeUndefined();
    expect(process.attributes['error.type']).toBe('TypeError');
    expect(process.events.map((event) => event.name)).toContain('unique-jobs.locked');
    const values = exporter.getFinishedSpans().flatMap(attributeValues).map(String);
    expect(values.filter((value) => value.includes('declined') || value.includes('customer-42'))).toEqual([]);
  });

  it('leaves jobs without uniqueness or idempotency untraced', async () => {
    const app = await start({ unique: { lock: 'until_executed', jobName: 'pay', lockArgs: byId } });
    const job = await app.queue.add('plain', { id: 'p' });
    await app.finished(job);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});
