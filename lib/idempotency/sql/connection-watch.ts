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

/**
 * Checks a client out of `pool` with its `'error'` watched from the moment the pool hands it over. A `pg` pool that is
 * full hands a client another caller returns straight to the next waiting `connect()`, inside that caller's reply (the
 * pool's idle listener removed); a backend termination parsed from the same read then emits `'error'` before any
 * continuation of `await pool.connect()` could listen, and with no listener Node ends the process. Given a callback,
 * `pg.Pool#connect` calls it synchronously at the hand-over, so the watch begins there. A pool whose `connect` takes no
 * callback is awaited and watched when it resolves.
 */
export function checkOutWatched<Client>(pool: {
  connect(): Promise<Client>;
}): Promise<{ client: Client; watch: ConnectionWatch }> {
  const connect = (pool as { connect: (callback: (error: unknown, client?: Client) => void) => unknown }).connect;
  if (connect.length < 1) return pool.connect().then((client) => ({ client, watch: watchConnection(client) }));
  return new Promise((resolve, reject) => {
    let settled = false;
    const handedOver = (error: unknown, client?: Client): void => {
      if (settled) return;
      settled = true;
      if (error) reject(error instanceof Error ? error : new Error(`pool.connect failed: ${JSON.stringify(error)}`));
      else resolve({ client: client as Client, watch: watchConnection(client) });
    };
    // A pool that answers with a promise even when given a callback is followed either way (whichever comes first).
    const returned = connect.call(pool, handedOver) as PromiseLike<Client> | undefined;
    if (typeof returned?.then === 'function') returned.then((client) => handedOver(undefined, client), handedOver);
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
  client?: unknown;
  watch?: ConnectionWatch;
  /** Whether the transaction's callback ran (with this client). */
  adopted?: boolean;
  /** The openings of its pool still waiting for their client, while this one is among them. */
  waiting?: Set<Opening>;
}

const opening = new AsyncLocalStorage<Opening>();
/** The openings of each hooked pool still waiting for their client. */
const waitingOn = new WeakMap<object, Set<Opening>>();
/** Ends the guard of a client handed over while openings waited ({@link guardHandover}). */
const guards = new WeakMap<object, () => void>();

/** The client an opening was handed, with the watch begun when it was handed over. */
function take(slot: Opening, client: unknown, watch: ConnectionWatch): void {
  slot.client = client;
  slot.watch = watch;
  slot.waiting?.delete(slot);
  slot.waiting = undefined;
}

/**
 * The openings of `pool` waiting for a client; the first call hooks the pool. A client checked out in the context of a
 * waiting opening (a free connection, or a new one) is that opening's, watched from there. A client handed over in
 * another context, while openings wait (a full pool gives a client back inside the reply of the caller that freed it,
 * and hands it to the next waiting `connect()`), is guarded: see {@link guardHandover}.
 */
function waitingOf(pool: PoolLike): Set<Opening> {
  const known = waitingOn.get(pool);
  if (known) return known;
  const waiting = new Set<Opening>();
  waitingOn.set(pool, waiting);
  pool.on('acquire', (client: unknown) => {
    const current = opening.getStore();
    if (current?.waiting === waiting && current.client === undefined) take(current, client, watchConnection(client));
    else if (waiting.size > 0) guardHandover(client);
  });
  pool.on('release', (_error: unknown, client: unknown) => {
    if (typeof client === 'object' && client !== null) guards.get(client)?.();
  });
  return waiting;
}

/**
 * Watches a client handed over in another caller's context while openings wait for theirs: a backend termination
 * read in the same reply that freed it is emitted before its new owner runs, and with no listener would end the
 * process. Its first statement tells whose it is: sent in the context of a waiting opening (the driver's `BEGIN`), the
 * client and this watch become that opening's; sent by anyone else, or the client released first, the guard ends (it
 * keeps ignoring the errors of a connection that emitted one, as {@link ConnectionWatch.stop} does). The client's
 * `query` is wrapped only until then.
 */
function guardHandover(client: unknown): void {
  const target = client as { query?: unknown };
  const query = target.query;
  if (typeof query !== 'function' || guards.has(target)) return;
  const hadOwn = Object.prototype.hasOwnProperty.call(target, 'query');
  const watch = watchConnection(client);
  const end = (): void => {
    guards.delete(target);
    if (hadOwn) target.query = query;
    else delete target.query;
  };
  guards.set(target, () => {
    end();
    watch.stop();
  });
  target.query = function (this: unknown, ...args: unknown[]): unknown {
    end();
    const current = opening.getStore();
    if (current?.waiting && current.client === undefined) take(current, client, watch);
    else watch.stop();
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  };
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
 * client's `'error'` watched from the moment it is checked out, so that a connection dropped during `BEGIN` never
 * reaches Node as an unhandled `'error'` event. A pool is hooked once ({@link waitingOf}): a client checked out in the
 * asynchronous context of `open` is watched from its checkout, and one a full pool hands over in another caller's
 * context is guarded from the hand-over until `open`'s first statement on it claims it ({@link guardHandover}). A single
 * client is watched at once.
 */
export async function openWatched<R>(source: unknown, open: (watch: CheckoutWatch) => Promise<R>): Promise<R> {
  const slot: Opening = {};
  if (isPool(source)) {
    slot.waiting = waitingOf(source);
    slot.waiting.add(slot);
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
    slot.waiting?.delete(slot);
  }
}

/** A `pg` pool: it emits `'acquire'` with each client it checks out and `'release'` with each it gets back. */
interface PoolLike {
  on(event: 'acquire', listener: (client: unknown) => void): unknown;
  on(event: 'release', listener: (error: unknown, client: unknown) => void): unknown;
}

/** A `pg` pool (or any pool emitting `'acquire'` with the client it checks out). */
function isPool(value: unknown): value is PoolLike {
  return (
    isErrorEmitter(value) &&
    typeof (value as { connect?: unknown }).connect === 'function' &&
    typeof (value as { totalCount?: unknown }).totalCount === 'number'
  );
}
