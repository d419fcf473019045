import { createHash } from 'node:crypto';
import { cut, describeThrown } from '../errors/thrown.js';
import type { DeadSetEntry } from './dead-set-entry.interface.js';

/** Longest part of a parse error an unreadable entry's reason shows (UTF-16 code units). */
const MAX_PARSE_ERROR = 200;

/**
 * An entry as stored under `id`: its JSON parsed, or, when the value is not an entry's JSON (data written to the
 * entries hash by something other than the library, or damaged), a placeholder that says so. The placeholder is kept
 * `truncated` (its payload unknown, with the size and sha256 of the value): it can be listed and deleted, not retried,
 * and it does not fail the listing, the admin pages or a lock's detail that read the entries around it.
 */
export function storedEntry(id: string, text: string): DeadSetEntry {
  let problem: string;
  try {
    const value: unknown = JSON.parse(text);
    if (isEntry(value)) return value.id === id ? value : { ...value, id };
    problem = 'not a dead-set entry';
  } catch (error) {
    problem = `not JSON: ${cut(describeThrown(error).message, MAX_PARSE_ERROR)}`;
  }
  return {
    id,
    queue: '',
    jobName: '',
    digest: '',
    existingJobId: undefined,
    side: 'client',
    reason: `Unreadable dead-set entry (${problem}); delete it`,
    rejectedAt: 0,
    truncated: true,
    originalBytes: Buffer.byteLength(text),
    payloadSha256: createHash('sha256').update(text).digest('hex'),
  };
}

/** Whether a parsed value has an entry's identifying fields (what every page and a retry read). */
function isEntry(value: unknown): value is DeadSetEntry {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const fields = value as Record<string, unknown>;
  return (
    typeof fields.id === 'string' &&
    typeof fields.queue === 'string' &&
    typeof fields.jobName === 'string' &&
    typeof fields.digest === 'string' &&
    typeof fields.reason === 'string' &&
    typeof fields.rejectedAt === 'number' &&
    (fields.side === 'client' || fields.side === 'server')
  );
}
