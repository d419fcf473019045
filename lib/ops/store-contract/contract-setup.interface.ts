import type { IdempotencyStore } from '../../idempotency/idempotency-store.interface.js';

/** Writes and counts rows of the caller's own table, to observe commit and rollback of a handler's writes. */
export interface TransactionProbe<Transaction> {
  /** Inserts one row holding `marker` through the transaction handle `runInTransaction` gave the handler. */
  write(transaction: Transaction, marker: string): Promise<void>;
  /** The number of committed rows holding `marker`, read outside any transaction. */
  count(marker: string): Promise<number>;
}

/** What {@link ContractSetup.create} provides to the suite. */
export interface ContractFixture<Transaction> {
  /** The store under test. */
  store: IdempotencyStore<Transaction>;
  /**
   * More instances of the same store on the same data, each with its own connection(s) (optional). The concurrency
   * cases spread their claims over {@link store} and these.
   */
  peers?: readonly IdempotencyStore<Transaction>[];
  /** Required when the store is transactional: see {@link TransactionProbe}. */
  probe?: TransactionProbe<Transaction>;
  /** Removes what the run created (keys, tables, files) and closes connections; called in `afterAll`. */
  cleanup(): Promise<void>;
}

/** How the suite gets its store(s). */
export interface ContractSetup<Transaction = unknown> {
  /**
   * Whether the store implements `runInTransaction`. Declared up front because Jest defines the cases before
   * `beforeAll` creates the store; the suite checks that the store agrees.
   */
  transactional: boolean;
  /** Creates the store(s); called once, in `beforeAll`. */
  create(): Promise<ContractFixture<Transaction>>;
}
