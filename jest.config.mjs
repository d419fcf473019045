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
  maxWorkers: 2,
};
