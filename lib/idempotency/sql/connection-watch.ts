import { AsyncLocalStorage } from 'node:async_hooks';

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

/** `connect` of a `pg` pool, either form: given a callback it calls it at the hand-over, else it answers a promise. */
type ConnectFn = (this: unknown, ...args: unknown[]) => unknown;

/**
 * Checks a client out of `pool` with its `'error'` watched from the moment the pool hands it over. A `pg` pool that is
 * full hands a client another caller returns straight to the next waiting `connect()`, inside that caller's reply (the
 * pool's idle listener removed); a backend termination parsed from the same read then emits `'error'` before any
 * continuation of `await pool.connect()` could listen, and with no listener Node ends the process. Given a callback,
 * `pg.Pool#connect` calls it synchronously at the hand-over, so the watch begins there. A pool (or wrapper) that
 * ignores the callback and answers a promise is watched when the promise resolves.
 */
export function checkOutWatched<Client>(pool: {
  connect(): Promise<Client>;
}): Promise<{ client: Client; watch: ConnectionWatch }> {
  let watch: ConnectionWatch | undefined;
  return connectHandedOver((pool as unknown as { connect: ConnectFn }).connect, pool, (client) => {
    watch = watchConnection(client);
  }).then((client) => ({ client: client as Client, watch: watch! }));
}

/**
 * Calls `connect` with a callback, which runs `handedOver(client)` as soon as the pool hands the client over (before
 * anything else can run); a promise answered instead is followed too, whichever comes first. Resolves the client.
 */
function connectHandedOver(
  connect: ConnectFn,
  pool: unknown,
  handedOver: (client: unknown) => void,
  callback?: (...answer: unknown[]) => unknown,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const answered = (...answer: unknown[]): void => {
      if (settled) return;
      settled = true;
      const [error, client] = answer;
      if (error) {
        reject(error instanceof Error ? error : new Error(`pool.connect failed: ${JSON.stringify(error)}`));
      } else {
        handedOver(client);
        resolve(client);
      }
      callback?.(...answer);
    };
    const returned = connect.call(pool, answered) as PromiseLike<unknown> | undefined;
    if (typeof returned?.then === 'function') returned.then((client) => answered(undefined, client), answered);
  });
}

/** Whether `value` has `on` and `removeListener` (an event emitter, as far as a listener needs). */
export function isEmitter<Emitter extends { on: unknown; removeListener: unknown }>(value: unknown): value is Emitter {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<Emitter>).on === 'function' &&
    typeof (value as Partial<Emitter>).removeListener === 'function'
  );
}

function isErrorEmitter(value: unknown): value is ErrorEmitterLike {
  return isEmitter<ErrorEmitterLike>(value);
}

/** A transaction being opened: the pool client it was handed, watched from its checkout. */
interface Opening {
  /** The pool its driver checks the client out of. */
  pool?: object;
  client?: unknown;
  watch?: ConnectionWatch;
  /** Whether the transaction's callback ran (with this client). */
  adopted?: boolean;
  /** Its first checkout was asked for, or it ended: later `connect` calls in its context are not its transaction's. */
  asked?: boolean;
}

const opening = new AsyncLocalStorage<Opening>();
/** The `connect` the library gave each pool it hooked. */
const hooks = new WeakMap<object, ConnectFn>();

/**
 * Gives `pool` a `connect` of its own that, called in the context of an opening of this pool that has not asked for its
 * client yet (the driver's checkout for the transaction: Drizzle's `db.transaction()`, TypeORM's runner), checks out
 * with a callback and watches the client from the hand-over ({@link checkOutWatched} tells why); every other call goes
 * to the `connect` the pool had (its own property then, else its prototype's, looked up at each call) unchanged. Done
 * again when the pool's `connect` is no longer the one given (replaced or deleted since). A pool that cannot be given
 * a property is watched from {@link CheckoutWatch.adopt}.
 */
function hookConnect(pool: PoolLike): void {
  const current = pool.connect as ConnectFn;
  if (hooks.get(pool) === current) return;
  const own = Object.prototype.hasOwnProperty.call(pool, 'connect') ? current : undefined;
  const original = (): ConnectFn => own ?? (Object.getPrototypeOf(pool) as { connect: ConnectFn }).connect;
  // One declared parameter, as pg.Pool#connect has (`connect.length`).
  const connect = function (this: unknown, callback?: unknown, ...rest: unknown[]): unknown {
    const args = callback === undefined && rest.length === 0 ? [] : [callback, ...rest];
    const slot = opening.getStore();
    if (slot?.pool !== pool || slot.asked) return original().apply(this, args);
    slot.asked = true;
    const handedOver = (client: unknown): void => {
      slot.client = client;
      slot.watch = watchConnection(client);
    };
    const answer = typeof callback === 'function' ? (callback as (...a: unknown[]) => unknown) : undefined;
    const checkedOut = connectHandedOver(original(), this, handedOver, answer);
    if (!answer) return checkedOut;
    checkedOut.catch(() => undefined); // answered through the callback
    return undefined;
  };
  try {
    Object.defineProperty(pool, 'connect', { value: connect, configurable: true, writable: true });
    hooks.set(pool, connect);
  } catch {
    // A frozen pool: its transactions' clients are watched once the driver hands them over (adopt).
  }
}

/** The watch of a transaction whose connection is checked out by a driver (Drizzle: `db.transaction()`). */
export interface CheckoutWatch {
  /**
   * The transaction's client, once its callback runs: keeps the watch begun at checkout when it is this client, else
   * watches it from now (a client the pool handed over in another context, e.g. once a full pool freed one).
   */
  adopt(client: unknown): void;
  /** The error its connection emitted, if any. */
  lost(): Error | undefined;
  /**
   * The connection dropped before the transaction's callback ran: gives the client back to its pool as broken, for a
   * driver that leaves it checked out (Drizzle sends `BEGIN` outside its own `try`, so a failed `BEGIN` never releases
   * the client, and the pool would wait for it forever). Does nothing otherwise.
   */
  releaseStranded(): void;
  stop(): void;
}

/**
 * Runs `open`, which checks a client out of `source` (a `pg` pool, or a client) and sends `BEGIN` on it, with that
 * client's `'error'` watched from the moment it is handed over, so that a connection dropped during `BEGIN`, or
 * terminated in the very reply that freed it for this transaction, never reaches Node as an unhandled `'error'` event.
 * A pool gets a `connect` of its own once ({@link hookConnect}); a single client is watched at once.
 */
export async function openWatched<R>(source: unknown, open: (watch: CheckoutWatch) => Promise<R>): Promise<R> {
  const slot: Opening = {};
  if (isPool(source)) {
    hookConnect(source);
    slot.pool = source;
  } else if (isErrorEmitter(source)) {
    slot.client = source;
    slot.watch = watchConnection(source);
  }
  const watch: CheckoutWatch = {
    adopt: (client) => {
      if (client === undefined) return;
      slot.adopted = true;
      if (slot.client === client) return;
      slot.watch?.stop();
      slot.client = client;
      slot.watch = watchConnection(client);
    },
    lost: () => slot.watch?.lost(),
    releaseStranded: () => {
      const lost = slot.watch?.lost();
      const release = (slot.client as { release?: unknown } | undefined)?.release;
      if (!lost || slot.adopted || typeof release !== 'function') return;
      slot.adopted = true;
      try {
        (release as (error: Error) => void).call(slot.client, lost);
      } catch {
        // Released already.
      }
    },
    stop: () => slot.watch?.stop(),
  };
  try {
    return await opening.run(slot, () => open(watch));
  } finally {
    slot.asked = true; // code its transaction left running in its context checks out nothing of its
  }
}

/** A `pg` pool, as far as its transactions' checkouts go. */
interface PoolLike {
  connect: unknown;
}

/** A `pg` pool: an event emitter with `connect` and a client count. */
function isPool(value: unknown): value is PoolLike {
  return (
    isErrorEmitter(value) &&
    typeof (value as { connect?: unknown }).connect === 'function' &&
    typeof (value as { totalCount?: unknown }).totalCount === 'number'
  );
}
