// The failover phase of `npm test`: the suites that fail masters over, on a 3-master Redis Cluster with a replica
// each (`node scripts/cluster.mjs --replicas=1 --jest-config=jest.cluster-failover.config.mjs`). A phase of its own:
// a failover disturbs every client of the master it moves, so it must not run beside the cluster phase's suites.
import base from './jest.config.mjs';

export default {
  ...base,
  testMatch: ['<rootDir>/test/cluster/**/*.failover.ts'],
};
