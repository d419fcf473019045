// The idempotency store contract suite: `nestjs-unique-jobs/store-contract` (Jest only; see describe-store-contract.ts).
export { describeIdempotencyStoreContract } from './describe-store-contract.js';
export type { ContractFixture, ContractSetup, TransactionProbe } from './contract-setup.interface.js';
