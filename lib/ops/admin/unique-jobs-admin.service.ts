import { Inject, Injectable, Optional, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, ModuleRef } from '@nestjs/core';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { UniqueJobsError } from '../../errors/unique-jobs.error.js';
import { lookUpStored } from '../../idempotency/stored-key.js';
import type { IdempotencyStore } from '../../idempotency/idempotency-store.interface.js';
import { RedisIdempotencyStore } from '../../idempotency/stores/redis-idempotency.store.js';
import type {
  HeldLockKind,
  InspectedQueue,
  LockCounts,
  LockFilter,
  LockPage,
} from '../inspection/lock-inspection.interface.js';
import { LockInspector } from '../inspection/lock-inspector.js';
import { LockCountCache } from '../inspection/lock-count-cache.js';
import type { UniqueJobsModuleOptions } from '../../options/unique-jobs-module-options.interface.js';
import { UNIQUE_JOBS_MODULE_OPTIONS } from '../../nest/unique-jobs.module-definition.js';
import { DEFAULT_PREFIX } from '../../options/defaults.js';
import { UNIQUE_JOBS_REDIS } from '../../nest/unique-jobs.constants.js';
import { UniqueJobsService } from '../../nest/unique-jobs.service.js';
import type {
  AdminDeadSetPage,
  AdminKeyLookup,
  AdminLockDetail,
  AdminRetryResult,
} from './interfaces/admin-views.interface.js';
import type { UniqueJobsAdminModuleOptions } from './interfaces/unique-jobs-admin-options.interface.js';
import { UNIQUE_JOBS_ADMIN_OPTIONS } from './unique-jobs-admin.constants.js';
import { DEFAULT_REJECTED, LockDetailReader } from './lock-detail.js';

/** How long (ms) the admin's counts are reused by page views and `api/counts` calls. */
const COUNTS_CACHE_MS = 5_000;

/**
 * What the admin page and API show and do, on top of the lock inspector, the dead set and the idempotency stores of
 * the application's `UniqueJobsModule`.
 */
@Injectable()
export class UniqueJobsAdminService implements OnModuleInit, OnModuleDestroy {
  private inspector!: LockInspector;
  private countCache!: LockCountCache;
  private details!: LockDetailReader;
  private readonly queues = new Map<string, Queue>();
  /** Queues this service created (from names in the `queues` option), closed on shutdown. */
  private readonly ownQueues: Queue[] = [];
  private stores = new Map<string, IdempotencyStore>();

  constructor(
    @Inject(UNIQUE_JOBS_ADMIN_OPTIONS) private readonly options: UniqueJobsAdminModuleOptions,
    private readonly moduleRef: ModuleRef,
    private readonly discovery: DiscoveryService,
    @Optional() private readonly uniqueJobs?: UniqueJobsService,
  ) {}

  /**
   * Nest lifecycle hook: finds the application's `UniqueJobsModule` (its Redis connection, prefix and idempotency
   * stores) and opens the inspected queues (`queues`, or every queue registered with `BullModule.registerQueue`).
   *
   * @throws UniqueJobsError when the application does not import `UniqueJobsModule.forRoot`.
   */
  onModuleInit(): void {
    const handle = this.find<{ client: Redis | Cluster }>(UNIQUE_JOBS_REDIS);
    const moduleOptions = this.find<UniqueJobsModuleOptions>(UNIQUE_JOBS_MODULE_OPTIONS);
    if (!this.uniqueJobs || !handle || !moduleOptions) {
      throw new UniqueJobsError(
        'UniqueJobsAdminModule needs UniqueJobsModule: import UniqueJobsModule.forRoot(...) in the application too',
      );
    }
    const client = handle.client;
    const prefix = moduleOptions.prefix ?? DEFAULT_PREFIX;
    this.resolveQueues(client);
    this.stores = new Map(
      Object.entries(
        this.options.idempotencyStores ?? {
          default: moduleOptions.idempotency?.store ?? new RedisIdempotencyStore({ client, prefix }),
          ...moduleOptions.idempotency?.stores,
        },
      ),
    );
    const inspected: InspectedQueue[] = [...this.queues.values()].map((queue) => ({
      name: queue.name,
      prefix: queue.opts.prefix ?? 'bull',
    }));
    this.inspector = new LockInspector({ client, prefix, queues: inspected });
    this.countCache = new LockCountCache(() => this.inspector.counts(), COUNTS_CACHE_MS);
    this.details = new LockDetailReader(this.inspector, this.queues, this.uniqueJobs.deadSet);
  }

  /** A provider of the application's UniqueJobsModule (global), or `undefined` when it is not there. */
  private find<T>(token: symbol | string): T | undefined {
    try {
      return this.moduleRef.get<T>(token, { strict: false });
    } catch {
      return undefined;
    }
  }

  /** Nest lifecycle hook: closes the queues the admin opened itself (those given by name that the app had not). */
  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.ownQueues.map((queue) => queue.close().catch(() => undefined)));
  }

  /** Names of the inspected queues. */
  queueNames(): string[] {
    return [...this.queues.keys()].sort();
  }

  /** Names of the idempotency stores the key lookup can query. */
  storeNames(): string[] {
    return [...this.stores.keys()];
  }

  /**
   * Locks and dead-set entries. The lock counts are a bounded count (200 SCAN calls; `complete: false` past them)
   * shared by the page views and API calls of 5 seconds, and made anew after a change made through the admin; the
   * dead-set count is read at each call.
   */
  async counts(): Promise<LockCounts> {
    const [counts, deadSet] = await Promise.all([this.countCache.get(), this.uniqueJobs!.deadSet.size()]);
    return { ...counts, deadSet };
  }

  /** One page of held locks. */
  listLocks(filter: LockFilter, cursor: string | undefined, limit: number): Promise<LockPage> {
    return this.inspector.listLocks(filter, { cursor, limit });
  }

  /**
   * Everything about one digest: its keys, its owner jobs (with their history) and its rejected duplicates, bounded:
   * at most 20 owners a key and 20 owner jobs, the newest `rejectedLimit` (default 20) rejected duplicates found in
   * the newest 2000 dead-set entries, the others counted (see {@link AdminLockDetail}).
   */
  showLock(digest: string, rejectedLimit = DEFAULT_REJECTED): Promise<AdminLockDetail> {
    return this.details.read(digest, rejectedLimit);
  }

  /** Deletes the lock keys of a digest (one kind, or both); resolves how many keys were removed. */
  releaseLock(digest: string, kind?: HeldLockKind): Promise<number> {
    return this.changing(this.inspector.releaseLock(digest, kind));
  }

  /** A page of the dead set, newest first. */
  async deadSet(offset: number, limit: number): Promise<AdminDeadSetPage> {
    const deadSet = this.uniqueJobs!.deadSet;
    const [entries, total] = await Promise.all([deadSet.list({ offset, limit }), deadSet.size()]);
    return { entries, offset, limit, total };
  }

  /** Enqueues a rejected duplicate again (under its uniqueness rules); `undefined` when there is no such entry. */
  async retryDead(id: string): Promise<AdminRetryResult | undefined> {
    const result = await this.changing(this.uniqueJobs!.deadSet.retry(id));
    if (!result) return undefined;
    return result.status === 'enqueued'
      ? { status: 'enqueued', jobId: result.job.id }
      : { status: 'duplicate', existingJobId: result.existingJobId, strategy: result.strategy };
  }

  /** Deletes a rejected duplicate; `false` when there was none. */
  deleteDead(id: string): Promise<boolean> {
    return this.changing(this.uniqueJobs!.deadSet.delete(id));
  }

  /**
   * The live idempotency record of (scope, key) in a store; `undefined` when the store is unknown. The scope and key
   * are normalised as `@IdempotencyKey` stores them (`normalizeIdempotencyKey`, `normalizeIdempotencyScope`: long,
   * `sha256:`-prefixed or unstorable text hashed); a scope or key given in its stored hashed form (`sha256:<hex>`, as
   * records and events show it) is also looked up as it is. The answer names them as stored, and says which of the two
   * matched (`matchedAs`).
   */
  async lookupKey(storeName: string, scope: string, key: string): Promise<AdminKeyLookup | undefined> {
    const store = this.stores.get(storeName);
    if (!store) return undefined;
    const { scope: storedScope, key: stored, record, matchedAs } = await lookUpStored(store, scope, key);
    return {
      store: storeName,
      scope: storedScope,
      key: stored,
      ...(matchedAs ? { matchedAs } : {}),
      record: record
        ? {
            scope: record.scope,
            key: record.key,
            state: record.state,
            jobId: record.jobId,
            fingerprint: record.fingerprint,
            result: record.result,
            error: record.error,
            attempts: record.attempts,
            createdAt: record.createdAt,
            expiresAt: record.expiresAt,
          }
        : null,
    };
  }

  private resolveQueues(client: Redis | Cluster): void {
    const registered = new Map<string, Queue>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance: unknown = wrapper.isDependencyTreeStatic() ? wrapper.instance : undefined;
      if (instance instanceof Queue && !registered.has(instance.name)) registered.set(instance.name, instance as Queue);
    }
    if (this.options.queues === undefined) {
      for (const [name, queue] of registered) this.queues.set(name, queue);
      return;
    }
    for (const entry of this.options.queues) {
      if (entry instanceof Queue) {
        this.queues.set(entry.name, entry);
        continue;
      }
      const { name, prefix } = typeof entry === 'string' ? { name: entry, prefix: undefined } : entry;
      const known = registered.get(name);
      if (known && (prefix === undefined || (known.opts.prefix ?? 'bull') === prefix)) {
        this.queues.set(name, known);
        continue;
      }
      const queue = new Queue(name, { connection: client, ...(prefix === undefined ? {} : { prefix }) });
      this.ownQueues.push(queue);
      this.queues.set(name, queue);
    }
  }

  /** `change`, after which the next count is made anew (settled or not: it may have changed something). */
  private changing<T>(change: Promise<T>): Promise<T> {
    return change.finally(() => this.countCache.clear());
  }
}
