import { BadRequestException } from '@nestjs/common';
import { isLockDigest, parseDigestPattern, parseDigestPrefix } from '../inspection/digest-format.js';
import type { HeldLockKind, LockFilter } from '../inspection/lock-inspection.interface.js';
import { stringParam } from './http.js';
import { DEFAULT_REJECTED, MAX_REJECTED } from './lock-detail.js';
import type { UniqueJobsAdminService } from './unique-jobs-admin.service.js';
import type { KeyQuery } from './views/keys.view.js';
import type { Notice } from './views/layout.view.js';

export type QueryParams = Record<string, unknown>;

/** Dead-set entry ids are UUIDs. */
const ENTRY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_JOB_ID = 256;
const MAX_SCOPE = 1024;
const MAX_KEY = 8192;
const MAX_CURSOR = 512;

/** Reads and checks the query parameters of the admin's routes (a bad one answers 400, naming it). */
export class AdminQuery {
  constructor(
    private readonly admin: UniqueJobsAdminService,
    private readonly pageSize: number,
  ) {}

  limitOf(value: unknown): number {
    const text = stringParam(value);
    if (text === undefined || text === '') return this.pageSize;
    const limit = Number(text);
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 500) {
      throw new BadRequestException('"limit" must be an integer from 1 to 500');
    }
    return limit;
  }

  /** `limit` of `api/locks/:digest`: rejected duplicates listed, 1-100 (default 20). */
  rejectedLimitOf(value: unknown): number {
    const text = stringParam(value);
    if (text === undefined || text === '') return DEFAULT_REJECTED;
    const limit = Number(text);
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_REJECTED) {
      throw new BadRequestException(`"limit" must be an integer from 1 to ${MAX_REJECTED}`);
    }
    return limit;
  }

  cursorOf(value: unknown): string | undefined {
    const cursor = stringParam(value);
    if (cursor !== undefined && cursor.length > MAX_CURSOR) throw new BadRequestException('"cursor" is too long');
    return cursor || undefined;
  }

  lockFilter(query: QueryParams): LockFilter {
    const filter: LockFilter = {};
    const digest = stringParam(query.digest)?.trim();
    if (digest) filter.digest = parseDigestPrefix(digest);
    const pattern = stringParam(query.pattern)?.trim();
    if (pattern) filter.pattern = parseDigestPattern(pattern);
    const kind = kindOf(query.kind);
    if (kind) filter.kind = kind;
    const queue = stringParam(query.queue);
    if (queue) {
      if (!this.admin.queueNames().includes(queue)) {
        throw new BadRequestException(`Unknown queue; inspected queues: ${this.admin.queueNames().join(', ')}`);
      }
      filter.queue = queue;
    }
    const jobId = stringParam(query.jobId)?.trim();
    if (jobId) {
      if (jobId.length > MAX_JOB_ID) throw new BadRequestException('"jobId" is too long');
      filter.jobId = jobId;
    }
    return filter;
  }

  async lookup(query: KeyQuery) {
    const { store = '', scope = '', key = '' } = query;
    if (scope.length > MAX_SCOPE || key.length > MAX_KEY) throw new BadRequestException('Scope or key too long');
    const lookup = await this.admin.lookupKey(store, scope, key);
    if (!lookup) {
      throw new BadRequestException(`Unknown idempotency store; stores: ${this.admin.storeNames().join(', ')}`);
    }
    return lookup;
  }
}

export function kindOf(value: unknown): HeldLockKind | undefined {
  const kind = stringParam(value);
  if (kind === undefined || kind === '') return undefined;
  if (kind !== 'enqueue' && kind !== 'runtime') throw new BadRequestException('"kind" must be enqueue or runtime');
  return kind;
}

export function offsetOf(value: unknown): number {
  const text = stringParam(value);
  if (text === undefined || text === '') return 0;
  const offset = Number(text);
  if (!Number.isSafeInteger(offset) || offset < 0) throw new BadRequestException('"offset" must be an integer ≥ 0');
  return offset;
}

export function entryIdOf(id: string): string {
  if (!ENTRY_ID.test(id)) throw new BadRequestException('Invalid dead-set entry id');
  return id.toLowerCase();
}

/** The message after a redirect: fixed sentences; only a validated digest and numbers come from the URL. */
export function noticeOf(query: QueryParams): Notice | undefined {
  const digest = stringParam(query.lock);
  const lock = isLockDigest(digest) ? `lock ${digest}` : 'the lock';
  switch (stringParam(query.notice)) {
    case 'released': {
      const n = Number(stringParam(query.n));
      return Number.isSafeInteger(n) && n > 0
        ? { text: `Released ${lock}: ${n} key${n === 1 ? '' : 's'} deleted.` }
        : { text: `Nothing to release: ${lock} held no key any more.`, error: true };
    }
    case 'retried':
      return stringParam(query.status) === 'enqueued'
        ? { text: 'Retried: the job was enqueued again.' }
        : { text: 'Retried: the job is still a duplicate (its lock is held); its strategy handled it again.' };
    case 'deleted':
      return { text: 'Deleted the rejected duplicate.' };
    case 'missing-entry':
      return { text: 'No such rejected duplicate (already retried or deleted?).', error: true };
    default:
      return undefined;
  }
}
