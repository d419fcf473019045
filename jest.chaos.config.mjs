// `npm run test:chaos`: the fault-injection suite (test/chaos/*.chaos.ts), two scenarios at a time (each runs several
// worker and producer processes against a Redis server of its own). Its figures go to .build/chaos-report.json.
// `npm run test:chaos -- --full` runs the fleet scenario (test/chaos/fleet.chaos.ts) at its full figure, over 10,000
// deliveries (scripts/test.mjs turns `--full` into UNIQUE_JOBS_CHAOS_FULL=1); the test sets its own timeout.
import base from './jest.config.mjs';

export default {
  ...base,
  testMatch: ['<rootDir>/test/chaos/**/*.chaos.ts'],
  globalSetup: '<rootDir>/test/chaos/global-setup.ts',
  globalTeardown: '<rootDir>/test/chaos/global-teardown.ts',
  testTimeout: 120000,
  // Two scenarios at a time (each on a Redis server of its own): 122 s one at a time, 84 s two at a time on this 2-core
  // machine (session 43). Their checks count what happened (duplicates, losses, overlaps), not how fast.
  maxWorkers: 2,
};
