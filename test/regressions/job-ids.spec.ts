// The ids the library gives unique jobs: never repeated, never integer-like (BullMQ refuses integer custom ids), and
// shorter than a UUID (every key and event of the job carries the id).
import { describe, expect, it } from '@jest/globals';
import { newJobId } from '../../lib/producer/job-ids.js';

describe('library job ids', () => {
  it('never repeat, start with a letter and stay short', () => {
    const ids = Array.from({ length: 100_000 }, () => newJobId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of [ids[0], ids[99_999]]) {
      expect(id).toMatch(/^u[A-Za-z0-9_-]{12}[0-9a-z]+$/);
      expect(id.length).toBeLessThan(36);
    }
    // One process tag: only the counter differs.
    expect(ids[1].slice(0, 13)).toBe(ids[0].slice(0, 13));
  });
});
