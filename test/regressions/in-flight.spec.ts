// `InFlight` (what a guarded removal waits for before reading a slot's lease): a second move tracked under a key while
// the first is under way does not hide the first (review helper-141: the latest replaced the earlier one).
import { describe, expect, it } from '@jest/globals';
import { InFlight } from '../../lib/common/in-flight.js';

const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
};

describe('InFlight', () => {
  it('settles once every work tracked under the key ended, failed ones included, and forgets the key then', async () => {
    const inFlight = new InFlight();
    const first = gate();
    const second = gate();
    inFlight.track('job', first.opened);
    inFlight.track(
      'job',
      second.opened.then(() => Promise.reject(new Error('move failed'))),
    );
    let settled = false;
    const waiting = inFlight.settled('job').then(() => (settled = true));
    second.open();
    await second.opened;
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false); // the first is still under way
    first.open();
    await waiting;
    expect(settled).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect((inFlight as unknown as { pending: Map<string, unknown> }).pending.size).toBe(0);
    await expect(inFlight.settled('other')).resolves.toBeUndefined();
  });
});
