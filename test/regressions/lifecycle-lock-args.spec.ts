// L1: lock arguments that are not plain data (a Promise from an async `lockArgs`, an Error, binary buffers, a WeakRef,
// an object whose data lives in prototype getters) have no faithful JSON form: they must be refused at enqueue
// (UnserializableLockArgsError, nothing enqueued), not hashed as `{}`, which makes jobs with different data collide.
import { describe, expect, it } from '@jest/globals';
import { Job } from 'bullmq';
import { UnserializableLockArgsError, type EnqueueResult, type UniqueJobOptions } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { dedupKey, digestOf, enqueuedJob } from '../support/locks.js';

interface Data {
  id: string;
  n?: number;
}

/** What an enqueue did, in a form a diff shows well: its status, or the error it was refused with. */
async function outcomeOf(promise: Promise<EnqueueResult | Job>): Promise<Record<string, unknown>> {
  try {
    const value = await promise;
    if (value instanceof Job) return { status: 'returned a job', jobId: value.id };
    return value.status === 'enqueued'
      ? { status: 'enqueued', jobId: value.job.id }
      : { status: 'duplicate', existingJobId: value.existingJobId };
  } catch (error) {
    if (error instanceof UnserializableLockArgsError) {
      return { error: 'UnserializableLockArgsError', path: error.path, message: error.message };
    }
    return { error: String(error) };
  }
}

/** Refused before anything reached Redis, at the top of the lock arguments (or their first item). */
const refused = { error: 'UnserializableLockArgsError', path: expect.stringMatching(/^\$(\[0\])?$/) };

/** An object whose data lives only behind a prototype getter: no own enumerable property, so JSON writes `{}`. */
class GetterRef {
  readonly #id: string;
  constructor(id: string) {
    this.#id = id;
  }
  get id(): string {
    return this.#id;
  }
}

/** A class instance with its data in own enumerable properties: plain data in all but its prototype. */
class Dto {
  constructor(readonly id: string) {}
}

describe('L1 lock arguments that are not plain data', () => {
  const { start, keysOf } = useApps('lcargs');

  async function appWith(lockArgs: UniqueJobOptions['lockArgs']) {
    return start({ unique: { lock: 'until_executed', lockArgs }, paused: true });
  }

  it('L1 lockArgs returning a Promise: service.enqueue and queue.add reject with UnserializableLockArgsError saying "synchronous"; nothing is enqueued (an async function is refused at bootstrap: regressions/input-options)', async () => {
    const app = await appWith((data: Data) => Promise.resolve([data.id]));
    const outcomes = [
      await outcomeOf(app.service.enqueue(app.queue, 'sync', { id: 'a' })),
      await outcomeOf(app.queue.add('sync', { id: 'b' })),
    ];
    // Today both Promises hash as {}: the first is enqueued, and queue.add of other data returns that same job.
    expect(outcomes).toMatchObject([refused, refused]);
    for (const outcome of outcomes) expect(outcome.message).toMatch(/synchronous/);
    expect(await app.queue.getJobCounts('waiting', 'delayed', 'prioritized', 'active')).toEqual({
      waiting: 0,
      delayed: 0,
      prioritized: 0,
      active: 0,
    });
    expect(await keysOf(app)).toEqual([]);
  });

  it.each([
    ['an Error instance', (data: Data) => new Error(data.id)],
    ['an ArrayBuffer', (data: Data) => new TextEncoder().encode(data.id).buffer],
    ['a WeakRef', (data: Data) => new WeakRef({ id: data.id })],
    ['a Uint8Array', (data: Data) => new TextEncoder().encode(data.id)],
    ['a class instance whose data lives only in prototype getters', (data: Data) => new GetterRef(data.id)],
    // From the hostile review: JSON drops symbol keys, and a Proxy's traps are not its own data.
    ['an object keyed by a symbol', (data: Data) => ({ [Symbol.for('id')]: data.id })],
    ['a Proxy of {}', (data: Data) => new Proxy({}, { get: (_t, key) => (key === 'id' ? data.id : undefined) })],
  ])(
    'L1 lockArgs returning %s: enqueue rejects with UnserializableLockArgsError and nothing is enqueued',
    async (_label, lockArgs) => {
      const app = await appWith(lockArgs);
      const outcomes = [
        await outcomeOf(app.service.enqueue(app.queue, 'sync', { id: 'a' })),
        await outcomeOf(app.service.enqueue(app.queue, 'sync', { id: 'b' })),
      ];
      // Today they are accepted; all but the Uint8Array hash as {}, so job "b" is a duplicate of job "a".
      expect(outcomes).toMatchObject([refused, refused]);
      expect(await app.queue.getJobCounts('waiting', 'delayed', 'prioritized', 'active')).toEqual({
        waiting: 0,
        delayed: 0,
        prioritized: 0,
        active: 0,
      });
      expect(await keysOf(app)).toEqual([]);
    },
  );

  it('L1 (control) a class instance with own enumerable data is accepted and hashes like the plain object', async () => {
    const app = await start({
      unique: [
        { lock: 'until_executed', jobName: 'dto', uniqueAcross: 'names', lockArgs: (data: Data) => new Dto(data.id) },
        {
          lock: 'until_executed',
          jobName: 'plain',
          uniqueAcross: 'names',
          lockArgs: (data: Data) => ({ id: data.id }),
        },
      ],
      paused: true,
    });
    const dtoDigest = app.service.digestOf(app.queue.name, 'dto', { id: 'a' });
    expect(dtoDigest).toBe(app.service.digestOf(app.queue.name, 'plain', { id: 'a' }));
    expect(dtoDigest).not.toBe(app.service.digestOf(app.queue.name, 'dto', { id: 'b' }));

    const holder = enqueuedJob(await app.service.enqueue(app.queue, 'dto', { id: 'a' }));
    expect(await app.service.enqueue(app.queue, 'plain', { id: 'a' })).toMatchObject({
      status: 'duplicate',
      existingJobId: holder.id,
    });
    const other = enqueuedJob(await app.service.enqueue(app.queue, 'dto', { id: 'b' }));
    expect(other.id).not.toBe(holder.id);
    expect(await keysOf(app)).toContain(dedupKey(app.queue.name, digestOf(app, 'dto', { id: 'a' })));
  });
});
