import type { IdempotencyStore } from '../../idempotency/idempotency-store.interface.js';
import type { ContractFixture, ContractSetup } from './contract-setup.interface.js';

/** What each group of the contract's cases reads: the store(s) under test, created once the cases run. */
export interface ContractContext<Transaction> {
  /** Names the store in test titles and errors. */
  name: string;
  /** The caller's setup (whether the store is transactional). */
  setup: ContractSetup<Transaction>;
  /** The fixture `setup.create` made (throws when it failed). */
  current: () => ContractFixture<Transaction>;
  /** The store under test. */
  storeOf: () => IdempotencyStore<Transaction>;
  /** The store and its peers: the claimants of the race cases. */
  contenders: () => IdempotencyStore<Transaction>[];
}
