// The store contract's entry point resolves for a user's store, types and all (running the suite needs Jest, which
// this app does not install: the import is of types only, and nothing loads this file at run time).
import type { IdempotencyStore } from 'nestjs-unique-jobs';
import type { ContractSetup } from 'nestjs-unique-jobs/store-contract';

export function contractSetupOf(store: IdempotencyStore, close: () => Promise<void>): ContractSetup {
  return { transactional: false, create: async () => ({ store, cleanup: close }) };
}
