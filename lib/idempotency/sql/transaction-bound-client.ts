import { UniqueJobsError } from '../../errors/unique-jobs.error.js';

/** Why a statement on a transactional handler's client is refused once the claim's transaction is over. */
export const TRANSACTION_OVER =
  "A statement was run on the client an @IdempotencyKey handler got for the claim's transaction after that transaction ended (the handler had returned or thrown): it would run outside it, on a connection back in the pool (committed on its own, or inside another caller's transaction). Await every statement of the handler before it returns";

/** Why the handler's client refuses `release()`. */
export const RELEASE_REFUSED =
  "release() was called on the client an @IdempotencyKey handler got for the claim's transaction: the store checked that connection out and releases it itself once the transaction ends. Released by the handler, it would go back to the pool inside the open transaction (another caller's statements would join it); called later, it would release whoever checked that connection out next (pg hands out the same client object again)";

/**
 * The `pg` client a transactional handler gets: `client` itself while the claim's transaction is open, and a client
 * whose `query` is refused once `over()` says it ended, answered as `pg` answers a query that fails: the callback's
 * error (the last argument, or the config's `callback`), a Submittable's `handleError` (pg-cursor, pg-query-stream:
 * the Submittable returned), else a rejected promise; so are the reads, once it ended, of a Submittable sent before
 * (pg-cursor's `read`, pg-query-stream's cursor). The handler may keep a reference past its end (a timer, a
 * promise chain not awaited); by then the connection is back in the pool, where its statement would be committed on
 * its own or join whatever transaction its next holder runs. The store's own statements go to `client` directly.
 * Statements sent before the end are left alone: `pg` runs them in order, inside the transaction. Its `release()`
 * always throws a {@link UniqueJobsError} ({@link RELEASE_REFUSED}): the store releases the connection itself.
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
      if (property !== 'query' || typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        if (!over() || owners?.(args)) {
          boundReads(args[0], over);
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
 * as an unhandled rejection: it is told as a process warning instead (nothing was written).
 */
function lateRejection(error: Error): Promise<never> {
  const answer = Promise.reject(error);
  answer.catch(() => process.emitWarning(error.message, { code: 'UNIQUE_JOBS_LATE_STATEMENT' }));
  return answer;
}

/** A cursor's `read`, as pg-cursor declares it: rows asked for, and an optional callback (else a promise). */
type CursorRead = (this: unknown, rows: number, callback?: (error: Error | null, rows?: unknown[]) => void) => unknown;

/**
 * A Submittable that reads after its submit (pg-cursor: `read`; pg-query-stream: its `cursor`'s `read`) sends each read
 * to the connection itself, not through the client: a read once the transaction ended would reach a connection back in
 * the pool (its portal closed by the COMMIT; the answer taken for the statement of whoever holds it next). Its reads
 * are refused from then on, answered as pg-cursor answers a read that fails.
 */
function boundReads(config: unknown, over: () => boolean): void {
  if (typeof config !== 'object' || config === null || typeof (config as { submit?: unknown }).submit !== 'function') {
    return;
  }
  // A stream's own `read` is Node's (Readable), which reads through its cursor: the cursor's is the one bound.
  const cursor = (config as { cursor?: unknown }).cursor;
  const reader = (typeof cursor === 'object' && cursor !== null ? cursor : config) as { read?: unknown };
  const read = reader.read;
  if (typeof read !== 'function') return;
  reader.read = function (this: unknown, ...[rows, callback]: Parameters<CursorRead>): unknown {
    if (!over()) return (read as CursorRead).call(this, rows, callback);
    const error = new UniqueJobsError(TRANSACTION_OVER);
    if (typeof callback !== 'function') return lateRejection(error);
    queueMicrotask(() => callback(error));
    return undefined;
  };
}
