// `npm run test:chaos`: the fault-injection suite (test/chaos/*.chaos.ts), one scenario at a time (each runs several
// worker and producer processes against a Redis server of its own). Its figures go to .build/chaos-report.json.
import base from './jest.config.mjs';

export default {
  ...base,
  testMatch: ['<rootDir>/test/chaos/**/*.chaos.ts'],
  globalSetup: '<rootDir>/test/chaos/global-setup.ts',
  testTimeout: 120000,
  maxWorkers: 1,
};
