import type {
  IdempotencyCompletion,
  IdempotencyStore,
  IdempotencyTransactionalClaim,
  IdempotencyTransactionResult,
  TransactionClaim,
} from './idempotency-store.interface.js';

/**
 * Transactional mode on a store that cannot claim inside the handler's transaction: {@link IdempotencyStore.claim},
 * then {@link IdempotencyStore.runInTransaction}, which locks the claimed record for its transaction. Answers as
 * {@link IdempotencyStore.claimInTransaction} does.
 */
export async function claimThenTransaction<T, Transaction>(
  store: IdempotencyStore<Transaction>,
  request: IdempotencyTransactionalClaim,
  work: (transaction: Transaction, claim: TransactionClaim) => Promise<T>,
  completion: (value: T) => IdempotencyCompletion,
  /** Called once the claim won, before the transaction opens. */
  won?: (takeover: boolean) => void,
): Promise<IdempotencyTransactionResult<T>> {
  if (!store.runInTransaction) throw new Error(`Idempotency store "${store.name}" has no transactions`);
  const claim = await store.claim({ ...request, transactional: true });
  if (!claim.claimed) return claim;
  won?.(claim.takeover && !claim.resumed); // a resumed step is no takeover: nobody died mid-run
  const answer: TransactionClaim = { takeover: claim.takeover };
  if (claim.resumed) answer.resumed = true;
  if (claim.laterStep) answer.laterStep = true;
  const value = await store.runInTransaction(request, (tx) => work(tx, answer), completion);
  return { claimed: true, value };
}
