import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';

describe('idempotency smoke', () => {
  const apps = useApps('idem-smoke');
  it('runs once, replays after', async () => {
    let effects = 0;
    const app = await apps.start({
      idempotency: { key: (job) => (job.data as { id: string }).id },
      handler: async (job) => {
        effects++;
        return { charged: (job.data as { id: string }).id };
      },
    });
    const a = await app.queue.add('charge', { id: 'o1' });
    expect(await app.finished(a)).toEqual({ charged: 'o1' });
    const b = await app.queue.add('charge', { id: 'o1' });
    expect(await app.finished(b)).toEqual({ charged: 'o1' });
    expect(effects).toBe(1);
  });
});
