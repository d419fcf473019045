/** The part of an event emitter (a `pg` client) the watch needs. */
export interface ErrorEmitterLike {
  on(event: 'error', listener: (error: Error) => void): unknown;
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
}

/** Watches one connection for the length of a transaction. */
export interface ConnectionWatch {
  /** The error the connection emitted since the watch began, if any: it is broken, and its transaction is lost. */
  lost(): Error | undefined;
  /**
   * Ends the watch. A connection that emitted an error keeps a listener that ignores later errors (it is being
   * discarded and may emit again when its socket closes); a healthy one is left as it was.
   */
  stop(): void;
}

/**
 * Listens for `'error'` on a connection checked out for a transaction. A `pg` client emits `'error'` when its
 * connection drops while no query is running (the handler is awaiting something else): with no listener, Node throws
 * "Unhandled 'error' event" and the process ends. With this one, the error is kept, the transaction's next statement
 * fails ("not queryable"), and the adapter reports it as `IdempotencyConnectionLostError`.
 *
 * `connection` may be anything: a value that is not an event emitter is not watched (its driver reports errors through
 * its promises).
 */
export function watchConnection(connection: unknown): ConnectionWatch {
  if (!isErrorEmitter(connection)) return { lost: () => undefined, stop: () => undefined };
  let lost: Error | undefined;
  const onError = (error: Error): void => {
    lost ??= error;
  };
  connection.on('error', onError);
  return {
    lost: () => lost,
    stop: () => {
      if (!lost) connection.removeListener('error', onError);
    },
  };
}

function isErrorEmitter(value: unknown): value is ErrorEmitterLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<ErrorEmitterLike>).on === 'function' &&
    typeof (value as Partial<ErrorEmitterLike>).removeListener === 'function'
  );
}
