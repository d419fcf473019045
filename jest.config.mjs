import { availableParallelism } from 'node:os';

/** Jest runs the TypeScript sources as ES modules (NestJS 12 ships ESM only). */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    '^nestjs-unique-jobs$': '<rootDir>/lib/index.ts',
    '^nestjs-unique-jobs/testing$': '<rootDir>/lib/ops/testing/index.ts',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json', diagnostics: { ignoreCodes: [151002] } }],
  },
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  testTimeout: 30000,
  // On a clean clone (CI), the suites known to be longest start first (scripts/test-sequencer.mjs).
  testSequencer: '<rootDir>/scripts/test-sequencer.mjs',
  // Twice the cores (at most 8): a test spends most of its time waiting on Redis, PostgreSQL or a child process, not on
  // its own CPU. On this 2-core machine the single-Redis phase took 508 s with 2 workers and 385 s with 4, every test
  // passing both ways (session 43); the tests must hold on a loaded machine anyway, and this load is part of proving it.
  maxWorkers: Math.min(8, Math.max(2, 2 * availableParallelism())),
  // How long a worker has to end once the run is over before jest kills it and warns "A worker process has failed to
  // exit gracefully" (jest's default: 500 ms). With no handle left open, a worker's last JavaScript runs within a few ms
  // of jest's request to end, but the process can take longer than 500 ms to die: its main thread frees a heap of up to
  // a few GB (the module graphs of every test file it ran: Nest, TypeORM, Drizzle, BullMQ each time), measured at 666 ms
  // for one at 1.7 GB on a loaded machine. Five seconds leaves room for that; a worker kept alive by a real leak (an open
  // socket, a ref'd timer) is still reported.
  workerGracefulExitTimeout: 5000,
};
