import { uncallable } from '../common/function-kind.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import type { IdempotencyDefaults, IdempotencyKeyOptions } from './idempotency-key-options.interface.js';
import type { IdempotencyModuleOptions } from './idempotency-key-options.interface.js';
import {
  describeOptionValue,
  integerProblem,
  isPlainObject,
  MAX_TIMER_MS,
  stripUndefined,
} from '../common/option-values.js';
import type { IdempotencyStore } from './idempotency-store.interface.js';

/** The defaults of every `@IdempotencyKey` option (overridable in `forRoot({ idempotency: { defaults } })`). */
export const DEFAULT_IDEMPOTENCY_OPTIONS: Readonly<IdempotencyDefaults> = {
  ttl: 24 * 60 * 60 * 1000,
  lease: 30_000,
  onInProgress: 'delay',
  onFailure: 'release',
  onMissingKey: 'error',
  maxResultBytes: 1024 * 1024,
};

/** The largest `maxResultBytes`: Redis' largest string (512 MiB). */
export const MAX_RESULT_BYTES = 512 * 1024 * 1024;

/** Keys longer than this many characters are stored as `sha256:<hex>` (hashed, never truncated). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** `@IdempotencyKey` options with every default applied. */
export interface EffectiveIdempotencyOptions extends IdempotencyDefaults {
  transactional: boolean;
}

const OPTION_KEYS = [
  'key',
  'jobName',
  'scope',
  'fingerprint',
  'store',
  'transactional',
  ...(Object.keys(DEFAULT_IDEMPOTENCY_OPTIONS) as (keyof IdempotencyDefaults)[]),
] as const;

const CHOICES: { [K in keyof IdempotencyDefaults]?: readonly string[] } = {
  onInProgress: ['delay', 'fail'],
  onFailure: ['release', 'keep'],
  onMissingKey: ['error', 'run'],
};

/**
 * Checks one set of `@IdempotencyKey` options, applies the defaults and picks the store. Every problem is reported at
 * bootstrap with where the options came from, the option and the valid values.
 */
export function resolveIdempotencyOptions(
  source: string,
  options: IdempotencyKeyOptions,
  defaults: Partial<IdempotencyDefaults> | undefined,
  stores: IdempotencyStores,
): { options: EffectiveIdempotencyOptions; store: IdempotencyStore; storeName: string } {
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError(source, option, problem);
  };
  if (typeof options !== 'object' || options === null) fail('options', 'must be a key function or an object');
  for (const key of Object.keys(options)) {
    if (!(OPTION_KEYS as readonly string[]).includes(key)) {
      fail(key, `is not an option; valid options: ${OPTION_KEYS.join(', ')}`);
    }
  }
  if (typeof options.key !== 'function') {
    fail('key', 'must be a function of the job returning its key from the domain data, e.g. job => job.data.eventId');
  }
  const keyProblem = uncallable(options.key, 'key', 'the key itself');
  if (keyProblem) fail('key', `is ${keyProblem}`);
  const merged = { ...DEFAULT_IDEMPOTENCY_OPTIONS, ...stripUndefined(defaults ?? {}), ...stripUndefined(options) };
  checkDefaults(merged, fail);

  const names = options.jobName === undefined ? [] : [options.jobName].flat();
  if (options.jobName !== undefined && (names.length === 0 || names.some((n) => typeof n !== 'string' || n === ''))) {
    fail('jobName', 'must be a non-empty job name or a non-empty list of them');
  }
  if (options.scope !== undefined && (typeof options.scope !== 'string' || options.scope === '')) {
    fail('scope', 'must be a non-empty string');
  }
  const { fingerprint } = options;
  const fingerprintValid =
    fingerprint === undefined ||
    fingerprint === 'data' ||
    fingerprint === false ||
    typeof fingerprint === 'function' ||
    (Array.isArray(fingerprint) &&
      fingerprint.length > 0 &&
      fingerprint.every((field) => typeof field === 'string' && field !== ''));
  if (!fingerprintValid) {
    fail('fingerprint', "must be 'data', false, a non-empty list of top-level field names, or a function of the data");
  }
  const fingerprintProblem =
    typeof fingerprint === 'function' ? uncallable(fingerprint, 'fingerprint', 'the values to compare') : undefined;
  if (fingerprintProblem) fail('fingerprint', `is ${fingerprintProblem}`);

  const storeName = options.store;
  const store = storeName === undefined ? stores.default : stores.named.get(storeName);
  if (!store) {
    const valid = [...stores.named.keys()];
    fail(
      'store',
      `names no store (got ${describeOptionValue(storeName)}); stores from forRoot({ idempotency: { stores } }): ${valid.join(', ') || 'none'}; leave "store" out for the default store (${stores.default.name})`,
    );
  }
  if (options.transactional !== undefined && typeof options.transactional !== 'boolean') {
    fail('transactional', 'must be true or false');
  }
  const transactional = options.transactional ?? false;
  // Named as registered; the default store by its own name.
  const name = storeName ?? store!.name;
  if (
    transactional &&
    typeof store!.runInTransaction !== 'function' &&
    typeof store!.claimInTransaction !== 'function'
  ) {
    fail(
      'transactional',
      `needs a store with transactions (a SQL store: PostgreSQL or SQLite, directly or through TypeORM, Drizzle or @nestjs-cls/transactional); store "${name}" has none: set store to one that has`,
    );
  }
  return { options: { ...merged, transactional }, store: store!, storeName: name };
}

/** The stores `@IdempotencyKey` can name. */
export interface IdempotencyStores {
  default: IdempotencyStore;
  named: ReadonlyMap<string, IdempotencyStore>;
}

/** Checks `forRoot({ idempotency })` (the parts that are not per-job). */
export function validateIdempotencyModuleOptions(options: IdempotencyModuleOptions | undefined): void {
  if (options === undefined) return;
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError('UniqueJobsModule.forRoot', `idempotency${option && `.${option}`}`, problem);
  };
  if (!isPlainObject(options)) {
    fail('', `must be an object with store, stores, defaults (got ${describeOptionValue(options)})`);
  }
  for (const option of ['stores', 'defaults'] as const) {
    if (options[option] !== undefined && !isPlainObject(options[option])) {
      fail(option, `must be an object (got ${describeOptionValue(options[option])})`);
    }
  }
  for (const key of Object.keys(options)) {
    if (!['store', 'stores', 'defaults'].includes(key)) fail(key, 'is not an option; valid: store, stores, defaults');
  }
  const stores = Object.entries(options.stores ?? {});
  const declared = [
    ...(options.store === undefined ? [] : [['store', options.store] as const]),
    ...stores.map(([name, store]) => [`stores.${name}`, store] as const),
  ];
  for (const [name, store] of declared) {
    const methods = ['claim', 'renew', 'complete', 'fail', 'release', 'get', 'delete'] as const;
    const missing = methods.filter((m) => typeof (store as unknown as Record<string, unknown>)?.[m] !== 'function');
    if (missing.length > 0) fail(name, `is not an IdempotencyStore: it lacks ${missing.join(', ')}`);
  }
  const defaultKeys = Object.keys(DEFAULT_IDEMPOTENCY_OPTIONS);
  for (const key of Object.keys(options.defaults ?? {})) {
    if (!defaultKeys.includes(key)) fail(`defaults.${key}`, `is not a default; valid: ${defaultKeys.join(', ')}`);
  }
  checkDefaults({ ...DEFAULT_IDEMPOTENCY_OPTIONS, ...stripUndefined(options.defaults ?? {}) }, (option, problem) =>
    fail(`defaults.${option}`, problem),
  );
}

function checkDefaults(merged: IdempotencyDefaults, fail: (option: string, problem: string) => never): void {
  const integer = (option: 'ttl' | 'lease' | 'maxResultBytes', min: number, max?: number, unit = ' (milliseconds)') => {
    const problem = integerProblem(merged[option], min, max, unit);
    if (problem) fail(option, problem);
  };
  integer('ttl', 1);
  // The lease is renewed on a timer: bounded by what Node's timers accept.
  integer('lease', 100, MAX_TIMER_MS);
  integer('maxResultBytes', 0, MAX_RESULT_BYTES, ' (bytes)');
  for (const [option, valid] of Object.entries(CHOICES)) {
    const value = merged[option as keyof IdempotencyDefaults];
    if (!valid.includes(value as string)) {
      fail(option, `must be one of ${valid.map((v) => `'${v}'`).join(', ')} (got ${describeOptionValue(value)})`);
    }
  }
}
