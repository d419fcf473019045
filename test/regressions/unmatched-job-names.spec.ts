// A job whose name no unique job definition of its queue covers runs without any lock, as a job not meant to be unique
// should, and as a misspelt name did, silently: a processor of `@UniqueJob({ jobName: 'settle-payment' })` given
// `queue.add('settle', …)` ran every duplicate (session 45's new-user review). The worker now says so, once per queue
// and job name.
import { describe, expect, it } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { captureLogger } from '../support/events.js';

describe('a job of a queue with unique job definitions that none of them covers', () => {
  const { start } = useApps('unmatched-names');

  it('runs without a lock and is reported once per queue and job name, naming the names defined', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({
      unique: { lock: 'until_executed', jobName: 'settle-payment', lockArgs: (data: { id: number }) => data.id },
      module: { logger },
    });
    const reported = () => lines.warn.filter((line) => line.includes('runs without a unique-job lock'));
    const misspelt = [await app.queue.add('settle', { id: 1 }), await app.queue.add('settle', { id: 1 })];
    for (const job of misspelt) await app.finished(job);
    expect(app.runs.map((job) => job.id)).toEqual(misspelt.map((job) => job.id)); // both ran: no lock
    expect(reported()).toEqual([
      expect.stringContaining(`Job ${misspelt[0].id} ("settle" on queue "${app.queue.name}")`),
    ]);
    expect(reported()[0]).toContain('(they name "settle-payment")');

    // The defined name is locked and not reported; another unmatched name is reported once too.
    await app.finished(await app.queue.add('settle-payment', { id: 1 }));
    await app.finished(await app.queue.add('receipt', { id: 1 }));
    expect(reported()).toHaveLength(2);
    expect(reported()[1]).toContain('("receipt" on queue');
  });

  it('a huge job name is reported cut to 100 characters, and remembered so', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({ unique: { lock: 'until_executed', jobName: 'settle-payment' }, module: { logger } });
    const huge = 'n'.repeat(100_000);
    await app.finished(await app.queue.add(huge, { id: 1 }));
    await app.finished(await app.queue.add(`${huge}-other-end`, { id: 1 })); // the same first 100 characters
    const reported = lines.warn.filter((line) => line.includes('runs without a unique-job lock'));
    expect(reported).toHaveLength(1);
    expect(reported[0]).toContain(`("${'n'.repeat(100)}…" on queue`);
    expect(reported[0].length).toBeLessThan(1_000);
  });

  it('says nothing on a queue whose definition covers every name', async () => {
    const { logger, lines } = captureLogger();
    const app = await start({ unique: { lock: 'until_executed' }, module: { logger } });
    await app.finished(await app.queue.add('anything', { id: 1 }));
    expect(lines.warn.filter((line) => line.includes('runs without a unique-job lock'))).toEqual([]);
  });
});
