import { UniqueJobsError } from '../../errors/unique-jobs.error.js';

/** Why a statement on a transactional handler's client is refused once the claim's transaction is over. */
export const TRANSACTION_OVER =
  "A statement was run on the client an @IdempotencyKey handler got for the claim's transaction after that transaction ended (the handler had returned or thrown): it would run outside it, on a connection back in the pool (committed on its own, or inside another caller's transaction). Await every statement of the handler before it returns";

/** Why the handler's client refuses `release()`. */
export const RELEASE_REFUSED =
  "release() was called on the client an @IdempotencyKey handler got for the claim's transaction: the store checked that connection out and releases it itself once the transaction ends. Released by the handler, it would go back to the pool inside the open transaction (another caller's statements would join it); called later, it would release whoever checked that connection out next (pg hands out the same client object again)";

/** Why the handler's client refuses `end()`. */
export const END_REFUSED =
  "end() was called on the client an @IdempotencyKey handler got for the claim's transaction: the store checked that connection out of its pool and gives it back itself. Ended by the handler, the transaction would be lost with it; called later, it would close the connection of whoever checked it out next (pg hands out the same client object again)";

/**
 * The `pg` client a transactional handler gets: `client` itself while the claim's transaction is open, and a client
 * whose `query` is refused once `over()` says it ended, answered as `pg` answers a query that fails: the callback's
 * error (the last argument, or the config's `callback`), a Submittable's `handleError` (pg-cursor, pg-query-stream:
 * the Submittable returned), else a rejected promise. The handler may keep a reference past its end (a timer, a
 * promise chain not awaited); by then the connection is back in the pool, where its statement would be committed on
 * its own or join whatever transaction its next holder runs. The store's own statements go to `client` directly.
 * Statements sent before the end are left alone: `pg` runs them in order, inside the transaction. So are the later
 * reads of a cursor sent before (pg-cursor, pg-query-stream), which go to the connection itself: until it is read to
 * its end or closed, `pg` sends nothing else, the store's COMMIT included, so they still run inside the transaction
 * (refused, a cursor read on after the handler returned never ended, and the COMMIT waited for it forever); once it
 * is done it answers reads without the connection. Its `release()` always throws a {@link UniqueJobsError}
 * ({@link RELEASE_REFUSED}), and its `end()` is always refused ({@link END_REFUSED}): the store gives the connection
 * back itself.
 */
export function transactionBoundClient<Client extends object>(
  client: Client,
  over: () => boolean,
  /** Lets through, once over, a statement of the transaction's owner itself (an ORM's own `commit`). */
  owners?: (args: unknown[]) => boolean,
): Client {
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'release' && typeof value === 'function') {
        return (): never => {
          throw new UniqueJobsError(RELEASE_REFUSED);
        };
      }
      if (property === 'end' && typeof value === 'function') {
        // Answered as pg's `end` answers: through its callback, else a promise.
        return (callback?: unknown): unknown => {
          const error = new UniqueJobsError(END_REFUSED);
          if (typeof callback !== 'function') return lateRejection(error);
          queueMicrotask(() => (callback as (error: Error) => void)(error));
          return undefined;
        };
      }
      if (property !== 'query' || typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        if (!over() || owners?.(args)) {
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        }
        return refused(args, new UniqueJobsError(TRANSACTION_OVER));
      };
    },
  });
}

/** What a `pg` query refused with `error` answers, as `pg` answers one that fails. */
function refused(args: unknown[], error: Error): unknown {
  const config = (typeof args[0] === 'object' ? args[0] : undefined) as
    { callback?: unknown; submit?: unknown; handleError?: unknown } | null | undefined;
  if (typeof config?.submit === 'function' && typeof config.handleError === 'function') {
    const handleError = config.handleError as (this: unknown, error: Error) => void;
    queueMicrotask(() => handleError.call(config, error));
    return config; // pg returns a Submittable itself
  }
  const last = args.at(-1);
  const callback = args.length > 1 && typeof last === 'function' ? last : config?.callback;
  if (typeof callback !== 'function') return lateRejection(error);
  queueMicrotask(() => (callback as (error: Error) => void)(error));
  return undefined;
}

/**
 * Rejected for whoever awaits it; a statement nobody awaits (`void client.query(…)` in a timer) must not end the process
 * as an unhandled rejection: it is told as a process warning instead (nothing was written). One awaited, or given a
 * `then`/`catch`/`finally` before the next turn of the event loop, is answered by its rejection alone.
 */
function lateRejection(error: Error): Promise<never> {
  const answer = new ObservedPromise<never>((_resolve, reject) => reject(error));
  void Promise.prototype.then.call(answer, undefined, () =>
    setImmediate(() => {
      if (!answer.observed) process.emitWarning(error.message, { code: 'UNIQUE_JOBS_LATE_STATEMENT' });
    }),
  );
  return answer;
}

/** A promise that records whether anyone asked for its outcome (`await`, `then`, `catch` and `finally` all call `then`). */
class ObservedPromise<T> extends Promise<T> {
  observed = false;

  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  override then<A = T, B = never>(
    onFulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    this.observed = true;
    return super.then(onFulfilled, onRejected);
  }
}
