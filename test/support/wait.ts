import type { QueueEvents } from 'bullmq';

/**
 * Polls `probe` (every 25 ms, at most `timeoutMs`) until it returns a truthy value, and resolves with it: for
 * time-based transitions only (TTL, lease, delay, age) and states no event reports.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T> | T,
  timeoutMs = 15_000,
): Promise<Exclude<T, undefined | null | false | 0 | ''>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as Exclude<T, undefined | null | false | 0 | ''>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Resolves when QueueEvents reports `event` for `jobId`. Subscribe before triggering the transition. */
export function queueEvent(
  queueEvents: QueueEvents,
  event: 'delayed' | 'stalled' | 'active' | 'waiting',
  jobId: string,
): Promise<void> {
  return new Promise((resolve) => {
    const listener = (args: { jobId: string }) => {
      if (args.jobId !== jobId) return;
      queueEvents.off(event, listener);
      resolve();
    };
    queueEvents.on(event, listener);
  });
}
