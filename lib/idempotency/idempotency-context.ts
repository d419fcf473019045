import { AsyncLocalStorage } from 'node:async_hooks';
import { hash } from 'node:crypto';
import { UniqueJobsError } from '../errors/unique-jobs.error.js';

/**
 * What a handler under `@IdempotencyKey` knows about its claim: read it with {@link idempotencyOf}`(job)` in the
 * processor, or {@link currentIdempotency}`()` anywhere below it (services called by the handler).
 */
export interface IdempotencyContext<Transaction = unknown> {
  /** Scope of the key. */
  readonly scope: string;
  /** The key as stored (keys over 255 characters are hashed). */
  readonly key: string;
  /**
   * `true` when this delivery took the key over from a holder whose lease ended (it crashed or stalled mid-run): the
   * effect may have been partly done. Check external systems, or rely on {@link downstreamKey}.
   */
  readonly takeover: boolean;
  /**
   * In transactional mode, the store's transaction: a `pg` client, the better-sqlite3 database, a TypeORM
   * `EntityManager`, a Drizzle `tx`, or `txHost.tx` of `@nestjs-cls/transactional`. Write your effect through it, and it
   * commits together with the completed record. `undefined` otherwise.
   */
  readonly transaction: Transaction | undefined;
  /**
   * A key derived from (scope, key, purpose) to hand to an external API (e.g. a payment provider's `Idempotency-Key`
   * header): the same for every delivery and retry of this key, different per purpose, and free of raw user data.
   */
  downstreamKey(purpose?: string): string;
}

const byJob = new WeakMap<object, IdempotencyContext>();
const current = new AsyncLocalStorage<IdempotencyContext>();

/** The idempotency context of a job being processed under `@IdempotencyKey`. */
export function idempotencyOf<Transaction = unknown>(job: object): IdempotencyContext<Transaction> {
  const context = byJob.get(job);
  if (!context) {
    throw new UniqueJobsError(
      'This job is not running under @IdempotencyKey (or its key was missing and onMissingKey is "run", or ' +
        'UniqueJobsModule runs with enabled: false): it has no idempotency context',
    );
  }
  return context as IdempotencyContext<Transaction>;
}

/** The idempotency context of the handler this code runs in, if any (AsyncLocalStorage). */
export function currentIdempotency<Transaction = unknown>(): IdempotencyContext<Transaction> | undefined {
  return current.getStore() as IdempotencyContext<Transaction> | undefined;
}

/** The mutable context the runner builds for one attempt. */
export class AttemptContext implements IdempotencyContext {
  transaction: unknown = undefined;

  constructor(
    readonly scope: string,
    readonly key: string,
    readonly takeover: boolean,
  ) {}

  /** An arrow property, so `const { downstreamKey } = idempotencyOf(job)` works. */
  readonly downstreamKey = (purpose = ''): string => {
    const digest = hash('sha256', `v1\0${this.scope}\0${this.key}\0${purpose}`, 'base64url');
    return `uj_${digest}`;
  };

  /** Runs `fn` with this context bound to `job` and to the async context. */
  run<T>(job: object, fn: () => Promise<T>): Promise<T> {
    byJob.set(job, this);
    return current.run(this, fn);
  }
}
