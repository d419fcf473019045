import { hash } from 'node:crypto';
import { isThenable } from '../common/function-kind.js';
import { canonicalJson } from '../digest/canonical-json.js';
import { IdempotencyStoreNotReadyError } from '../errors/idempotency-store-not-ready.error.js';
import { UnrecoverableUniqueJobsError } from '../errors/unrecoverable-unique-jobs.error.js';
import { JobNameRegistry, type JobNameScoped } from '../common/job-name-registry.js';
import type {
  IdempotencyDefaults,
  IdempotencyJob,
  IdempotencyKeyOptions,
} from './idempotency-key-options.interface.js';
import type { IdempotencyStore } from './idempotency-store.interface.js';
import { defaultIdempotencyScope, normalizeIdempotencyKey, normalizeIdempotencyScope } from './stored-key.js';
import {
  resolveIdempotencyOptions,
  type EffectiveIdempotencyOptions,
  type IdempotencyStores,
} from './idempotency-options.js';
import { asError, cut } from '../errors/thrown.js';
import { UnserializableLockArgsError } from '../errors/unserializable-lock-args.error.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';

/** How long the bootstrap waits for a store's `verify()`. */
const VERIFY_TIMEOUT_MS = 10_000;

/** The `@IdempotencyKey` options that apply to (queue, job name), validated, with defaults and the store. */
export interface ResolvedIdempotency extends JobNameScoped {
  readonly queue: string;
  readonly options: EffectiveIdempotencyOptions;
  readonly store: IdempotencyStore;
  /**
   * The store's name in events and messages: the name it is registered under in `forRoot({ idempotency: { stores } })`,
   * or, for the default store, its own `name` (`'redis'`, `'postgres'`, …).
   */
  readonly storeName: string;
  /** The scope of a job's key as stored (normalised like a key: `normalizeIdempotencyScope`). */
  scopeOf(job: IdempotencyJob): string;
  /** The key as stored (long keys hashed), or what the key function returned instead of a key. */
  keyOf(job: IdempotencyJob): { key: string } | { missing: string };
  /** The payload fingerprint, or `undefined` when payloads are not compared. */
  fingerprintOf(job: IdempotencyJob): string | undefined;
}

/** Which `@IdempotencyKey` options apply to (queue, job name). One instance per application. */
export class IdempotencyDefinitions {
  private readonly registry = new JobNameRegistry<ResolvedIdempotency>('idempotency options');
  /** The store of each explicit `scope` (as stored), and the options that declared it first. */
  private readonly scopes = new Map<string, { store: IdempotencyStore; storeName: string; source: string }>();

  constructor(
    private readonly defaults: Partial<IdempotencyDefaults> | undefined,
    private readonly stores: IdempotencyStores,
  ) {}

  /** Every store configured (the default and the named ones), each once. */
  allStores(): IdempotencyStore[] {
    return [...new Set([this.stores.default, ...this.stores.named.values()])];
  }

  /**
   * Runs `verify()` of every configured store that has one (each store once), at bootstrap. Throws
   * `IdempotencyStoreNotReadyError` naming the first store that is not ready as registered (`'default'` for
   * `idempotency.store`) with what its check found, e.g. a missing table and the migration that creates it.
   */
  async verifyStores(timeoutMs = VERIFY_TIMEOUT_MS): Promise<void> {
    const names = new Map<IdempotencyStore, string>();
    for (const [name, store] of [['default', this.stores.default] as const, ...this.stores.named]) {
      if (!names.has(store)) names.set(store, name);
    }
    await Promise.all(
      [...names].map(async ([store, name]) => {
        if (typeof store.verify !== 'function') return;
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_resolve, reject) => {
          timer = setTimeout(
            () => reject(new Error(`its check (verify()) did not answer within ${timeoutMs} ms: is the database up?`)),
            timeoutMs,
          );
        });
        try {
          await Promise.race([store.verify(), timeout]);
        } catch (error) {
          throw new IdempotencyStoreNotReadyError(name, asError(error).message, error);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }

  /** Registers options declared for a queue. Throws `InvalidUniqueJobOptionsError` (at bootstrap). */
  register(queue: string, declared: IdempotencyKeyOptions, source: string): ResolvedIdempotency {
    const { options, store, storeName } = resolveIdempotencyOptions(source, declared, this.defaults, this.stores);
    if (declared.scope !== undefined) this.checkSharedScope(declared.scope, store, storeName, source);
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
      storeName,
      scopeOf: (job) => normalizeIdempotencyScope(declared.scope ?? defaultIdempotencyScope(job)),
      keyOf: (job) => normalizeKey(declared.key(job)),
      fingerprintOf: (job) => (pick ? fingerprintOf(pick(job.data), job) : undefined),
    };
    return this.registry.add(queue, declared, resolved);
  }

  /**
   * An explicit `scope` shares keys between the options that declare it, so they must keep their records in one store:
   * in two, a key would be two records, and its effect would run once per store.
   */
  private checkSharedScope(scope: string, store: IdempotencyStore, storeName: string, source: string): void {
    const stored = normalizeIdempotencyScope(scope);
    const first = this.scopes.get(stored);
    if (!first) {
      this.scopes.set(stored, { store, storeName, source });
      return;
    }
    if (first.store === store) return;
    throw new InvalidUniqueJobOptionsError(
      source,
      'store',
      `is "${storeName}", but scope ${JSON.stringify(scope)} is also declared by ${first.source} on store "${first.storeName}": a scope shares its keys only within one store (in two, each store would run the effect of a key once). Give every @IdempotencyKey of the scope the same store, or another scope`,
    );
  }

  /** Whether any `@IdempotencyKey` was registered. */
  get any(): boolean {
    return this.registry.size > 0;
  }

  /** The options for a job, or `undefined` when it has no idempotency key. */
  find(queue: string, name: string): ResolvedIdempotency | undefined {
    return this.registry.find(queue, name);
  }

  /** Whether a job of the queue may have an idempotency key. */
  hasQueue(queue: string): boolean {
    return this.registry.hasQueue(queue);
  }
}

/** A key as stored: strings and finite numbers, normalised by `normalizeIdempotencyKey` (long keys hashed). */
function normalizeKey(raw: unknown): { key: string } | { missing: string } {
  let key: string | undefined;
  if (typeof raw === 'string' && raw !== '') key = raw;
  else if (typeof raw === 'number' && Number.isFinite(raw)) key = String(raw);
  if (key === undefined) {
    return { missing: isThenable(raw) ? 'a Promise (key functions must be synchronous)' : describeMissing(raw) };
  }
  return { key: normalizeIdempotencyKey(key) };
}

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
    // Named as the fingerprint's data, not as lock arguments (the canonical hash's own error); the path of a value
    // nested a thousand levels deep cut short.
    const why =
      error instanceof UnserializableLockArgsError
        ? `the data it is taken from cannot be hashed canonically at ${cut(error.path, 200)}: ${error.reason}`
        : asError(error).message;
    throw new UnrecoverableUniqueJobsError(
      `The idempotency fingerprint of job ${job.id ?? '(no id)'} (queue "${job.queueName}") cannot be computed: ${why} (the job's data, or the fields its \`fingerprint\` option names; \`fingerprint: false\` turns the check off)`,
    );
  }
  return `v1:${hash('sha256', json, 'base64url')}`;
}
