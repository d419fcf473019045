// Found by a hostile review (session 27): a lease's age was measured on the wall clock (`Date.now()`), so a step of it
// — NTP correcting a drifted clock, which it does at run time — moved every lease held at that moment. A step forward
// longer than the lease made the worker report `lockLost` ("a duplicate may run concurrently") for a run-time lock and
// an idempotency claim Redis still held; a step backward would have hidden a lease lost in a real event-loop stall.
// Leases are now measured on the monotonic clock (`performance.now()`); Redis' own clock decides their end, as before.
import { afterEach, describe, expect, it } from '@jest/globals';
import type { IdempotencyJob, UniqueJobEvent } from '../../lib/index.js';
import type { TestAppOptions } from '../support/app.js';
import { useApps } from '../support/apps.js';

const realNow = Date.now;
/** Steps this process's wall clock by `ms` (what NTP does to a drifted clock); `Date.now` only, as Node's timers are
 * monotonic. */
function stepWallClock(ms: number): void {
  Date.now = () => realNow() + ms;
}

describe('a step of the wall clock while a handler runs', () => {
  const { start, onCleanup } = useApps('wallstep');
  afterEach(() => void (Date.now = realNow));

  it.each([
    [
      'a run-time lock',
      { unique: { lock: 'while_executing', lockArgs: (d: { id: string }) => [d.id], runtimeLockLease: 3_000 } },
    ],
    [
      'an idempotency claim',
      { idempotency: { key: (job: IdempotencyJob<{ id: string }>) => job.data.id, lease: 3_000 } },
    ],
  ] as [string, Partial<TestAppOptions>][])(
    '%s: a step forward past the lease reports no lease lost',
    async (_label, options) => {
      const events: UniqueJobEvent[] = [];
      const app = await start({
        ...options,
        handler: async () => {
          stepWallClock(60_000);
          return 'done';
        },
      });
      const subscription = app.service.events$.subscribe((event) => events.push(event));
      onCleanup(async () => subscription.unsubscribe());
      const job = await app.queue.add('step', { id: 'w1' });
      await expect(app.finished(job)).resolves.toBe('done');
      Date.now = realNow;
      expect(events.map((event) => event.type)).not.toContain('lockLost');
      expect(events.map((event) => event.type)).not.toContain('idempotencyLeaseLost');
    },
  );
});
