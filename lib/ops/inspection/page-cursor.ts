import { createHash } from 'node:crypto';
import { InvalidCursorError } from './errors/invalid-cursor.error.js';

/**
 * The cursor's text: node index, that node's SCAN cursor, the first listing order of that batch not listed yet (with,
 * after a `-`, the SCAN cursor that batch ended at), and on a Cluster the masters' fingerprint.
 */
const CURSOR = /^n(\d{1,6})\.(\d{1,20})\.(\d{1,15})(?:-(\d{1,20}))?(?:\.([0-9a-f]{8}))?$/;
/** SCAN's cursor is an unsigned 64-bit number: a larger one is refused by Redis ("ERR invalid cursor"). */
const MAX_SCAN_CURSOR = 2n ** 64n - 1n;

/**
 * Where a lock listing stands: which node, its SCAN cursor, and where in that SCAN batch (the first listing order, see
 * `LockInspector.listLocks`, not listed yet; 0: from its start). `end`, with a `skip`: the SCAN cursor that batch
 * returned, so a scan of it again knows whether it covers the same keys (a cursor without it: not known).
 */
export interface Position {
  node: number;
  scan: string;
  skip: number;
  end?: string;
}

/**
 * The fingerprint of the masters a listing walks, in their order (`undefined` for a single Redis). A cursor names a
 * master by its place in that order and holds a SCAN cursor of that server: after a failover or a resharding the
 * place names another server, whose SCAN cursor means nothing, and masters would be skipped or walked twice.
 */
export function topologyOf(addresses: readonly string[] | undefined): string | undefined {
  return addresses && createHash('sha256').update(JSON.stringify(addresses)).digest('hex').slice(0, 8);
}

/**
 * The position of a listing's cursor (`'0'`: the start), made over the masters whose fingerprint is `topology`.
 *
 * @throws InvalidCursorError when `cursor` was not made by {@link encodeCursor}, or was made over other masters.
 */
export function decodeCursor(cursor: string, topology: string | undefined): Position {
  if (cursor === '0') return { node: 0, scan: '0', skip: 0 };
  const match = CURSOR.exec(cursor);
  if (!match || [match[2], match[4] ?? '0'].some((scan) => BigInt(scan) > MAX_SCAN_CURSOR)) {
    throw new InvalidCursorError(cursor);
  }
  if (match[5] !== topology) {
    throw new InvalidCursorError(
      cursor,
      topology === undefined
        ? 'it was made on a Redis Cluster'
        : "the Cluster's masters changed since it was made (a failover or a resharding)",
    );
  }
  return { node: Number(match[1]), scan: match[2], skip: Number(match[3]), end: match[4] };
}

/** The cursor text of a position over the masters whose fingerprint is `topology`. */
export function encodeCursor(position: Position, topology: string | undefined): string {
  const end = position.end === undefined ? '' : `-${position.end}`;
  return `n${position.node}.${position.scan}.${position.skip}${end}${topology === undefined ? '' : `.${topology}`}`;
}
