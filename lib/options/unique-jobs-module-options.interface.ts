import type { LoggerService } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { UniqueJobsLogLevels } from '../events/event-logger.js';
import type { ReaperOptions } from './reaper-options.js';
import type { ConflictStrategy } from '../conflicts/conflict-strategy.interface.js';
import type { IdempotencyModuleOptions } from '../idempotency/idempotency-key-options.interface.js';
import type { UniqueJobDefaults, UniqueJobDefinition } from '../interfaces/unique-job-options.interface.js';

/** Options of `UniqueJobsModule.forRoot` / `forRootAsync`. */
export interface UniqueJobsModuleOptions {
  /**
   * The Redis the locks live in: connection options, or a client the module will use but not close. It must be the
   * Redis server (and database) your queues live on, without an ioredis `keyPrefix` (rejected at bootstrap, as BullMQ
   * does: use `prefix`). Default: the connection of `BullModule.forRoot`, else 127.0.0.1:6379.
   */
  connection?: RedisOptions | Redis | Cluster;
  /** Prefix of every key the library writes itself. Default `'uniquejobs'`. */
  prefix?: string;
  /** Defaults for every per-job option. */
  defaults?: Partial<UniqueJobDefaults>;
  /**
   * Job definitions enforced by this application's queues even when it does not load the processor classes (a
   * producer-only service). Create them with `defineUniqueJob` and share them with the processor's `@UniqueJob`.
   */
  jobs?: readonly UniqueJobDefinition[];
  /** Custom conflict strategies, usable by name in `onConflict`. */
  strategies?: readonly ConflictStrategy[];
  /** The logger. Default: Nest's `Logger` with context `UniqueJobs`. `false` silences the library. */
  logger?: LoggerService | false;
  /**
   * The level of the line logged for each event type (`false`: none), over the defaults: `log` for duplicates,
   * replacements, reschedules and reaped keys, errors where they happen, and none for what every job does when all goes
   * well (locks taken and released, idempotency keys claimed and completed: `{ locked: 'debug', unlocked: 'debug' }`
   * turns them on). See docs/operations.md#log-lines.
   */
  logLevels?: UniqueJobsLogLevels;
  /** Stores and defaults of `@IdempotencyKey`. */
  idempotency?: IdempotencyModuleOptions;
  /**
   * How long an enqueue through the library (`queue.add` of a guarded queue, `UniqueJobsService.enqueue`) waits for its
   * queue's Redis connection when it is not ready (Redis down at startup, or reconnecting), in ms; then it fails with
   * `RedisUnavailableError`, having sent nothing. `false`: wait as long as it takes (BullMQ's own behaviour). Default
   * `10000`.
   */
  enqueueTimeout?: number | false;
  /**
   * How long the application's shutdown waits for a Redis that is out of reach (down, or restarting), or that keeps
   * its connections open but answers no `PING` (a paused process), before it disconnects from it, in ms: closing
   * BullMQ's queues, workers, flow producers and queue-events listeners registered in the application (and the
   * library's client) otherwise waits for Redis to come back, forever. Jobs still active on a connection let go are not
   * recorded and come back as stalled.
   * `false`: wait as long as it takes (BullMQ's own behaviour). Default `5000`.
   */
  shutdownTimeout?: number | false;
  /**
   * `false` turns the library off: no locks, no idempotency (jobs pass straight through to their handlers, with no
   * idempotency context: `idempotencyOf(job)` throws and `currentIdempotency()` is `undefined`, so a handler that reads
   * them, as a transactional one does, fails). Default `true`.
   */
  enabled?: boolean;
  /**
   * The orphan reaper: releases locks and idempotency claims whose job was removed or finished without releasing them,
   * and prunes the SQL stores. Runs every minute by default, in one process of the fleet at a time (the pruning of
   * the SQL stores in every process that has them).
   */
  reaper?: ReaperOptions;
  /**
   * Bounds of the dead set that keeps rejected duplicates: by entries, age and bytes, the oldest entries dropped first.
   * Each value is an integer from 1 to `Number.MAX_SAFE_INTEGER`.
   */
  deadSet?: {
    /** Most entries kept; the oldest are dropped first. Default `10000`. */
    maxSize?: number;
    /** Entries older than this (ms) are dropped. Default 7 days. */
    maxAge?: number;
    /**
     * Most bytes kept in total: the sum of the entries' JSON (UTF-8), enforced atomically on every add by dropping the
     * oldest entries. At least 1024. Default 64 MiB (`67108864`).
     */
    maxBytes?: number;
    /**
     * Largest entry (its JSON, UTF-8) kept whole. A larger one is kept truncated: without its `data` and `opts`, with
     * its size and the sha256 of what was dropped, and a warning is logged; it can be listed and deleted, not retried.
     * Capped at `maxBytes`. At least 1024 (a truncated entry alone takes a few hundred bytes; its longest strings are
     * cut to fit). Default 1 MiB (`1048576`).
     */
    maxEntryBytes?: number;
  };
}
