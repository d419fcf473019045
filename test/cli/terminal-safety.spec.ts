// What the CLI prints of Redis data is safe for a terminal: found by a hostile review (session wt-3). Error messages
// quoted a dead-set entry's queue and BullMQ prefix with JSON.stringify, which escapes C0 controls but leaves C1
// controls (U+009B is CSI in terminals that obey 8-bit controls, U+0085 a line break) and U+2028/U+2029 raw.
import { describe, expect, it, jest } from '@jest/globals';
import { useApps } from '../support/apps.js';
import { asDuplicate, byId } from '../support/locks.js';
import { UniqueJobsKeys } from '../../lib/redis/keys.js';
import { runCli } from './run-cli.js';

jest.setTimeout(120_000);

/** A control character a terminal may act on (newline aside, which separates the lines of a message). */
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

/** Escape sequences: set the window title, clear the screen (7-bit and 8-bit CSI), NEL and LINE SEPARATOR. */
const HOSTILE = 'q\u001b]0;owned\u0007\u001b[2J\u009b2J\u0085\u2028';

describe('unique-jobs: Redis data in error messages', () => {
  const { redis, start } = useApps('cli-tty', {
    unique: { lock: 'until_executed', lockArgs: byId, onConflict: 'reject' },
    paused: true,
  });

  it("a retry refused for an entry's queue or BullMQ prefix prints them with every control character escaped", async () => {
    const app = await start();
    await app.queue.add('job', { id: 'p', n: 0 });
    const id = asDuplicate(await app.service.enqueue(app.queue, 'job', { id: 'p', n: 1 })).deadSetEntryId!;
    const stored = (await app.service.deadSet.get(id))!;
    const entries = new UniqueJobsKeys(app.prefix).deadSetEntries;
    for (const [entry, refusal] of [
      [{ ...stored, queue: HOSTILE }, 'is not under the BullMQ prefix'],
      [{ ...stored, bullPrefix: HOSTILE }, 'was rejected in queue'],
    ] as const) {
      await redis.hset(entries, id, JSON.stringify(entry));
      const run = await runCli(['dead', 'retry', id, '--prefix', app.prefix]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(refusal);
      expect(run.stderr).toContain('\\u009b2J');
      expect(run.stderr).not.toMatch(RAW_CONTROL);
      expect(await app.service.deadSet.get(id)).toEqual(entry); // kept as it was
    }
  });
});
