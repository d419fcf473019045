// Jest's test order (jest.config.mjs `testSequencer`), for a run with no timings of an earlier one (a clean clone, as
// CI runs): jest's own sequencer then runs the biggest files first, but the longest suites here are small files whose
// time goes to child processes (the ORM scenarios, the CLI, the sample app), so they started last and the run ended on
// them with the other workers idle. These go first, longest first (their times in session 50's phase 1, on 2 cores).
// Once jest has timings (a second local run), its own order, by measured time, is kept.
import Sequencer from '@jest/test-sequencer';

const LONGEST_FIRST = [
  'test/idempotency/orm-cls.spec.ts',
  'test/cli/commands.spec.ts',
  'test/inspection/paging-release.spec.ts',
  'test/idempotency/orm-drizzle.spec.ts',
  'test/model/lifecycle.model.spec.ts',
  'test/e2e/sample-app.spec.ts',
  'test/idempotency/orm-typeorm.spec.ts',
  'test/regressions/retention.spec.ts',
  'test/concurrency.spec.ts',
  'test/cli/where.spec.ts',
  'test/cli/locks.spec.ts',
  'test/package/pack-install.spec.ts',
];

const rank = (test) => {
  const at = LONGEST_FIRST.findIndex((file) => test.path.endsWith(file));
  return at === -1 ? LONGEST_FIRST.length : at;
};

export default class LongestFirstSequencer extends (Sequencer.default ?? Sequencer) {
  sort(tests) {
    const sorted = super.sort(tests);
    if (sorted.some((test) => test.duration != null)) return sorted;
    // Array#sort is stable: the rest keep jest's order (by size).
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
