/**
 * The contract test suite every {@link IdempotencyStore} must pass: the Redis, PostgreSQL and SQLite stores run it, and
 * so should a store of your own.
 *
 * Shipped as its own entry point, `nestjs-unique-jobs/store-contract`, which needs Jest (`@jest/globals`, an optional
 * peer dependency): the library's other entry points never load it.
 *
 * Usage, in a Jest spec file:
 *
 * ```ts
 * import { describeIdempotencyStoreContract } from 'nestjs-unique-jobs/store-contract';
 *
 * describeIdempotencyStoreContract('my-store', {
 *   transactional: true, // whether the store implements `runInTransaction`
 *   async create() {
 *     // Called once, in `beforeAll`. Give every run its own namespace (key prefix, table, file).
 *     const store = new MyStore(connectionA);
 *     await store.migrate();
 *     return {
 *       store,
 *       // Optional: more instances of the same store on the same data, each with its own connection(s). The
 *       // concurrency cases spread their claims over `store` and these, so races cross connections.
 *       peers: [new MyStore(connectionB), new MyStore(connectionC)],
 *       // Required when `transactional`: writes a row to a table of the caller's own through the transaction handle
 *       // that `runInTransaction` passes to `work`, and counts committed rows (outside any transaction), so the suite
 *       // can check that handler writes commit and roll back together with the record.
 *       probe: {
 *         write: async (tx, marker) => void (await tx.query('INSERT INTO probe (marker) VALUES ($1)', [marker])),
 *         count: async (marker) => (await pool.query('SELECT ... WHERE marker = $1', [marker])).rows[0].n,
 *       },
 *       // Called once, in `afterAll`: drop what the run created and close the connections.
 *       cleanup: async () => { ... },
 *     };
 *   },
 * });
 * ```
 *
 * What it checks, following the TSDoc of `IdempotencyStore` (the spec): claim semantics (fresh, refused, concurrent,
 * takeover after a lease ends), complete/fail/renew/release as compare-and-set operations on the owner token, verbatim
 * storage of results (large and unicode JSON text) and errors, lease and retention expiry, isolation of scopes, keys
 * that hold any characters, get/delete, and, for transactional stores, that the handler's writes and the completed
 * record commit together or not at all. Every case asserts both what the store answers and what `get` reads back.
 *
 * Times: a store may use its own clock (a database server's). The suite never compares a store's absolute times with
 * the test's clock beyond a generous bound; it compares a record's `expiresAt` with the `expiresInMs` the store answers
 * to a refused claim. Expiry is awaited by polling `get` (no fixed sleeps), with leases of a second;
 * those cases set their own Jest timeout (40 s). A store without the optional `handOver` passes the hand-over cases
 * without being checked by them.
 * The cases use random keys in one scope, so they do not depend on one another's leftovers.
 */

import { afterAll, beforeAll, describe } from '@jest/globals';
import { claimInTransactionCases } from './claim-in-transaction.cases.js';
import { claimCases } from './claim.cases.js';
import type { ContractContext } from './contract-context.js';
import type { ContractFixture, ContractSetup } from './contract-setup.interface.js';
import { ownershipCases } from './ownership.cases.js';
import { recordCases } from './records.cases.js';
import { runInTransactionCases } from './run-in-transaction.cases.js';

/**
 * Defines the contract suite (one `describe` named after the store) for the store(s) `setup` creates.
 *
 * @param name Names the store in test titles.
 * @param setup Creates the store(s) in `beforeAll` and says whether it is transactional.
 */
export function describeIdempotencyStoreContract<Transaction>(name: string, setup: ContractSetup<Transaction>): void {
  describe(`idempotency store contract: ${name}`, () => {
    let fixture: ContractFixture<Transaction> | undefined;

    beforeAll(async () => {
      fixture = await setup.create();
    });

    afterAll(async () => {
      await fixture?.cleanup?.(); // required by the type; a JavaScript setup may leave it out
    });

    const current = (): ContractFixture<Transaction> => {
      if (!fixture) throw new Error(`the ${name} store was not created (see the beforeAll error)`);
      return fixture;
    };
    const context: ContractContext<Transaction> = {
      name,
      setup,
      current,
      storeOf: () => current().store,
      contenders: () => [current().store, ...(current().peers ?? [])],
    };
    claimCases(context);
    ownershipCases(context);
    recordCases(context);
    runInTransactionCases(context);
    claimInTransactionCases(context);
  });
}
