// @IdempotencyKey options changed across a deploy while records of the old build are in Redis (review 87). Two apps on
// one queue stand for the old build (which ran the first delivery) and the new one (which gets the second).
import { describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { IdempotencyKeyMismatchError, type IdempotencyKeyOptions, type IdempotencyJob } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { uniqueName } from '../support/redis.js';

interface Payment {
  eventId: string;
  amount: number;
}

const byEvent = (job: IdempotencyJob) => (job.data as Payment).eventId;

describe('@IdempotencyKey options changed across a deploy', () => {
  const { start } = useApps('cfgidem');

  /** The old build runs the first delivery to completion, then stops fetching; the new build runs the second. */
  async function deploy(before: IdempotencyKeyOptions, after: IdempotencyKeyOptions, prefixes = [uniqueName('cfgi')]) {
    const effects: string[] = [];
    const handler = async (job: Job) => {
      effects.push(job.id!);
      return { settled: (job.data as Payment).eventId };
    };
    const old = await start({ idempotency: before, handler, module: { prefix: prefixes[0] } });
    const first = await old.queue.add('settle', { eventId: 'evt_1', amount: 10 });
    expect(await old.finished(first)).toEqual({ settled: 'evt_1' });
    await old.worker!.close();
    const neu = await start({
      queue: old.queue.name,
      idempotency: after,
      handler,
      module: { prefix: prefixes.at(-1) },
    });
    const second = await neu.queue.add('settle', { eventId: 'evt_1', amount: 10 }); // the same payload, delivered again
    return { neu, second, effects };
  }

  it('I1 fingerprint changed (data → fields): an identical re-delivery fails as a mismatch, and the error says the fingerprint option may have changed', async () => {
    const { neu, second, effects } = await deploy({ key: byEvent }, { key: byEvent, fingerprint: ['eventId'] });
    const error = await neu.finished(second).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(effects).toHaveLength(1); // nothing ran twice
    // The stored fingerprint hashes the whole data, the new one one field of it: same payload, other hash. Today the
    // message says only "was already used with a different payload", which sends an operator after the producer.
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/different payload/);
    expect((error as Error).message).toMatch(/`fingerprint` option/);
    const failed = await neu.queue.getJob(second.id!);
    expect(failed?.failedReason).toMatch(/`fingerprint` option/);
    expect(IdempotencyKeyMismatchError.name).toBe('IdempotencyKeyMismatchError');
  });

  it('I2 (held) fingerprint turned off or on: the re-delivery replays (a record or a delivery without a fingerprint is not compared)', async () => {
    for (const [before, after] of [
      [{ key: byEvent }, { key: byEvent, fingerprint: false }],
      [{ key: byEvent, fingerprint: false }, { key: byEvent }],
    ] as [IdempotencyKeyOptions, IdempotencyKeyOptions][]) {
      const { neu, second, effects } = await deploy(before, after);
      expect(await neu.finished(second)).toEqual({ settled: 'evt_1' });
      expect(effects).toHaveLength(1);
    }
  });

  it('I3 (held, documented) the module prefix changed: the Redis records of the old prefix are not seen, so the effect runs again', async () => {
    const { neu, second, effects } = await deploy({ key: byEvent }, { key: byEvent }, [
      uniqueName('cfgiold'),
      uniqueName('cfginew'),
    ]);
    expect(await neu.finished(second)).toEqual({ settled: 'evt_1' });
    expect(effects).toEqual([expect.any(String), second.id]);
  });
});
