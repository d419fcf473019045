import { hash } from 'node:crypto';
import { canonicalJson } from '../digest/canonical-json.js';
import { UnrecoverableUniqueJobsError } from '../errors/unrecoverable-unique-jobs.error.js';
import { JobNameRegistry, type JobNameScoped } from '../common/job-name-registry.js';
import type {
  IdempotencyDefaults,
  IdempotencyJob,
  IdempotencyKeyOptions,
} from './idempotency-key-options.interface.js';
import type { IdempotencyStore } from './idempotency-store.interface.js';
import {
  MAX_IDEMPOTENCY_KEY_LENGTH,
  resolveIdempotencyOptions,
  type EffectiveIdempotencyOptions,
  type IdempotencyStores,
} from './idempotency-options.js';

/** The `@IdempotencyKey` options that apply to (queue, job name), validated, with defaults and the store. */
export interface ResolvedIdempotency extends JobNameScoped {
  readonly queue: string;
  readonly options: EffectiveIdempotencyOptions;
  readonly store: IdempotencyStore;
  /** The scope of a job's key. */
  scopeOf(job: IdempotencyJob): string;
  /** The key as stored (long keys hashed), or what the key function returned instead of a key. */
  keyOf(job: IdempotencyJob): { key: string } | { missing: string };
  /** The payload fingerprint, or `undefined` when payloads are not compared. */
  fingerprintOf(job: IdempotencyJob): string | undefined;
}

/** Which `@IdempotencyKey` options apply to (queue, job name). One instance per application. */
export class IdempotencyDefinitions {
  private readonly registry = new JobNameRegistry<ResolvedIdempotency>('idempotency options');

  constructor(
    private readonly defaults: Partial<IdempotencyDefaults> | undefined,
    private readonly stores: IdempotencyStores,
  ) {}

  /** Every store configured (the default and the named ones), each once. */
  allStores(): IdempotencyStore[] {
    return [...new Set([this.stores.default, ...this.stores.named.values()])];
  }

  /** Registers options declared for a queue. Throws `InvalidUniqueJobOptionsError` (at bootstrap). */
  register(queue: string, declared: IdempotencyKeyOptions, source: string): ResolvedIdempotency {
    const { options, store } = resolveIdempotencyOptions(source, declared, this.defaults, this.stores);
    const fingerprint = declared.fingerprint ?? 'data';
    const pick: ((data: unknown) => unknown) | undefined =
      fingerprint === false
        ? undefined
        : fingerprint === 'data'
          ? (data) => data
          : typeof fingerprint === 'function'
            ? fingerprint
            : (data) => pickFields(data, fingerprint);
    const resolved: ResolvedIdempotency = {
      queue,
      jobNames: declared.jobName === undefined ? undefined : [declared.jobName].flat(),
      source,
      options,
      store,
      scopeOf: (job) => declared.scope ?? `${job.queueName}:${job.name}`,
      keyOf: (job) => normalizeKey(declared.key(job)),
      fingerprintOf: (job) => (pick ? fingerprintOf(pick(job.data), job) : undefined),
    };
    return this.registry.add(queue, declared, resolved);
  }

  /** The options for a job, or `undefined` when it has no idempotency key. */
  find(queue: string, name: string): ResolvedIdempotency | undefined {
    return this.registry.find(queue, name);
  }
}

/** A key as stored: strings and finite numbers; longer than the limit, a sha256 (never a truncation). */
function normalizeKey(raw: unknown): { key: string } | { missing: string } {
  let key: string | undefined;
  if (typeof raw === 'string' && raw !== '') key = raw;
  else if (typeof raw === 'number' && Number.isFinite(raw)) key = String(raw);
  if (key === undefined) {
    return { missing: describeMissing(raw) };
  }
  const malformed = LONE_SURROGATE.test(key);
  if (key.length <= MAX_IDEMPOTENCY_KEY_LENGTH && !malformed) return { key };
  // A key that is not well-formed Unicode (a lone surrogate) would reach every store as UTF-8, where it turns into
  // U+FFFD and meets other keys: it is stored as the hash of its JSON text, which escapes the surrogate.
  return { key: `sha256:${hash('sha256', malformed ? JSON.stringify(key) : key, 'hex')}` };
}

/** A UTF-16 surrogate that is not part of a pair (in a `u` regular expression, pairs are one code point). */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** What a key function returned instead of a key, in plain words. */
function describeMissing(raw: unknown): string {
  if (raw === '') return 'an empty string';
  if (raw === undefined || raw === null || typeof raw === 'number') return String(raw);
  if (Array.isArray(raw)) return 'an array';
  return typeof raw === 'object' ? 'an object' : `a ${typeof raw}`;
}

function pickFields(data: unknown, fields: readonly string[]): unknown {
  const source = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
  return Object.fromEntries(fields.map((field) => [field, Object.hasOwn(source, field) ? source[field] : null]));
}

function fingerprintOf(selection: unknown, job: IdempotencyJob): string {
  let json: string;
  try {
    json = canonicalJson(selection);
  } catch (error) {
    throw new UnrecoverableUniqueJobsError(
      `The idempotency fingerprint of job ${job.id ?? '(no id)'} (queue "${job.queueName}") cannot be computed: ${(error as Error).message}`,
    );
  }
  return `v1:${hash('sha256', json, 'base64url')}`;
}
