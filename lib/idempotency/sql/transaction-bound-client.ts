import { UniqueJobsError } from '../../errors/unique-jobs.error.js';

/** Why a statement on a transactional handler's client is refused once the claim's transaction is over. */
export const TRANSACTION_OVER =
  "A statement was run on the client an @IdempotencyKey handler got for the claim's transaction after that transaction ended (the handler had returned or thrown): it would run outside it, on a connection back in the pool (committed on its own, or inside another caller's transaction). Await every statement of the handler before it returns";

/**
 * The `pg` client a transactional handler gets: `client` itself while the claim's transaction is open, and a client
 * whose `query` is refused (a rejected promise, or the callback's error) once `over()` says it ended. The handler may
 * keep a reference past its end (a timer, a promise chain not awaited); by then the connection is back in the pool,
 * where its statement would be committed on its own or join whatever transaction its next holder runs. The store's own
 * statements go to `client` directly. Statements sent before the end are left alone: `pg` runs them in order, inside
 * the transaction.
 */
export function transactionBoundClient<Client extends object>(client: Client, over: () => boolean): Client {
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property !== 'query' || typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        if (!over()) return (value as (...a: unknown[]) => unknown).apply(target, args);
        const error = new UniqueJobsError(TRANSACTION_OVER);
        const callback = args.at(-1);
        if (typeof callback !== 'function') return Promise.reject(error);
        queueMicrotask(() => (callback as (error: Error) => void)(error));
        return undefined;
      };
    },
  });
}
