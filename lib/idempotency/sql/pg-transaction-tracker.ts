import { isEmitter } from './connection-watch.js';

/** What a `pg` client's connection emits of the protocol (`client.connection`, a `pg` Connection). */
interface ProtocolEmitter {
  on(event: 'commandComplete', listener: (message: { text?: unknown }) => void): unknown;
  on(event: 'readyForQuery', listener: (message: { status?: unknown }) => void): unknown;
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
}

/** Follows one transaction on a `pg` client, from just after its `BEGIN`. */
export interface TransactionTracker {
  /**
   * `true` when every statement the connection ran since `BEGIN` left the transaction open and not aborted (no
   * `COMMIT`, `ROLLBACK`, `PREPARE TRANSACTION`, not in the failed state) and changed no setting (`SET`, `RESET`: a
   * `search_path` may have moved the record table's name); `false` otherwise; `undefined` when the client
   * does not show its protocol messages (then nothing can be told).
   */
  intact(): boolean | undefined;
  /** How many statements that end a transaction the connection completed since `BEGIN` (`undefined`: not seen). */
  endings(): number | undefined;
  stop(): void;
}

/** A command tag that ends the transaction (or may: `ROLLBACK TO SAVEPOINT` is tagged `ROLLBACK` too). */
const ENDING_TAG = /^(COMMIT|ROLLBACK|PREPARE TRANSACTION)\b/;

/** A setting changed (`SET search_path` may move the table's name): not an ending, but the store checks its record. */
const SETTING_TAG = /^(SET|RESET)\b/;

/**
 * Listens to the command tags and transaction states the server sends on `client`'s connection (what `pg` itself
 * reads to settle each query), so the store can tell, without a statement of its own, that nothing ended or aborted
 * its transaction: a raw `COMMIT` (even `COMMIT; BEGIN` in one call), a `ROLLBACK`, a failed statement the handler
 * caught.
 */
export function trackTransaction(client: unknown): TransactionTracker {
  const connection = (client as { connection?: unknown } | null)?.connection;
  if (!isEmitter<ProtocolEmitter>(connection)) {
    return { intact: () => undefined, endings: () => undefined, stop: () => undefined };
  }
  let intact = true;
  let endings = 0;
  const onComplete = (message: { text?: unknown }): void => {
    if (typeof message.text === 'string' && SETTING_TAG.test(message.text)) intact = false;
    if (typeof message.text === 'string' && !ENDING_TAG.test(message.text)) return;
    intact = false;
    endings++;
  };
  const onReady = (message: { status?: unknown }): void => {
    if (message.status !== 'T') intact = false;
  };
  connection.on('commandComplete', onComplete);
  connection.on('readyForQuery', onReady);
  return {
    intact: () => intact,
    endings: () => endings,
    stop: () => {
      connection.removeListener('commandComplete', onComplete);
      connection.removeListener('readyForQuery', onReady);
    },
  };
}
