import { InvalidCursorError } from './errors/invalid-cursor.error.js';

/** The cursor's text: node index, that node's SCAN cursor, and how many of that batch's candidates were listed. */
const CURSOR = /^n(\d{1,6})\.(\d{1,20})\.(\d{1,9})$/;
/** SCAN's cursor is an unsigned 64-bit number: a larger one is refused by Redis ("ERR invalid cursor"). */
const MAX_SCAN_CURSOR = 2n ** 64n - 1n;

/** Where a lock listing stands: which node, its SCAN cursor, and how many of that SCAN batch were already listed. */
export interface Position {
  node: number;
  scan: string;
  skip: number;
}

/**
 * The position of a listing's cursor (`'0'`: the start).
 *
 * @throws InvalidCursorError when `cursor` was not made by {@link encodeCursor}.
 */
export function decodeCursor(cursor: string): Position {
  if (cursor === '0') return { node: 0, scan: '0', skip: 0 };
  const match = CURSOR.exec(cursor);
  if (!match || BigInt(match[2]) > MAX_SCAN_CURSOR) throw new InvalidCursorError(cursor);
  return { node: Number(match[1]), scan: match[2], skip: Number(match[3]) };
}

/** The cursor text of a position. */
export function encodeCursor(position: Position): string {
  return `n${position.node}.${position.scan}.${position.skip}`;
}
