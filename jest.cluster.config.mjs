// `npm run test:cluster`: the lock and idempotency suites that use Redis, against a local 3-master Redis Cluster
// (scripts/cluster.mjs starts it and sets REDIS_CLUSTER_NODES; test/support/redis.ts then hands out Cluster clients and
// gives BullMQ the hash-tagged prefix `{bull}`; child-process fixtures inherit REDIS_CLUSTER_NODES). Suites that need
// only PostgreSQL or SQLite, or that are not about locks and idempotency, stay in `npm test` only.
import base from './jest.config.mjs';

export default {
  ...base,
  testMatch: [
    '<rootDir>/test/locks/**/*.spec.ts',
    '<rootDir>/test/conflicts/**/*.spec.ts',
    '<rootDir>/test/idempotency/redis-store.spec.ts',
    '<rootDir>/test/idempotency/idempotency-key.spec.ts',
    '<rootDir>/test/idempotency/effect-once.spec.ts',
    // The orphan reaper scans every master: its suite proves that on a cluster too.
    '<rootDir>/test/reaper/**/*.spec.ts',
    '<rootDir>/test/regressions/reaper-retry-window.spec.ts',
    // Cluster-only checks (the topology, and where keys land), never run by `npm test`.
    '<rootDir>/test/cluster/**/*.cluster.ts',
  ],
};
