import { hash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { nextReadyOrEnd } from '../redis/client-ready.js';
import type { UniqueJobsKeys } from '../redis/keys.js';

/**
 * After a failed start of the subscriber, how long the next one waits (ms): none after the first failure (the next key
 * held tries again at once), then doubling from 1 s to at most a minute while it keeps failing (a SUBSCRIBE the server
 * refuses must not cost a connection and a log line per job).
 */
const RESUBSCRIBE_MIN_MS = 1_000;
const RESUBSCRIBE_MAX_MS = 60_000;

/**
 * The Redis channel of waiting deliveries (`<prefix>:{idempotency}:waiting`): one subscriber connection per process,
 * opened on demand, that hands every message to `heard`; and the announcements sent on it. A channel the server
 * refuses (an ACL user without it) or Redis away costs a warning, never a delivery: those wait for the holder's lease.
 */
export class WaitersChannel {
  private subscriber: Redis | Cluster | undefined;
  private started: Promise<void> | undefined;
  /** Failed starts of the subscriber in a row, and when the next one may be tried. */
  private failedStarts = 0;
  private retryAt = 0;
  /** When an announcement that could not be sent was last said (ms). */
  private unannouncedWarnedAt = -Infinity;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly keys: UniqueJobsKeys,
    private readonly logger: LoggerLike,
    private readonly heard: (message: string) => void,
  ) {}

  /** Starts listening; a start that failed is forgotten, and tried again on a later call (backing off). */
  listen(): Promise<void> {
    if (!this.started && Date.now() < this.retryAt) return Promise.resolve();
    this.started ??= this.subscribe();
    return this.started;
  }

  /** Announces a waiting delivery to the key's holder; a refusal is said at most once a minute, never thrown. */
  async announce(message: object): Promise<void> {
    try {
      await this.client.publish(this.keys.idempotencyWaitersChannel, JSON.stringify(message));
    } catch (error) {
      if (!this.warnUnannounced()) return;
      this.logger.warn(
        `Deliveries waiting for an idempotency key in progress wait for the holder's lease: could not announce them to the holder (${this.describe(error)}; not repeated for a minute)`,
      );
    }
  }

  /**
   * Tells the deliveries of other queues that the key of `recordId` settled, without waiting; a refusal is said at most
   * once a minute (with those of {@link announce}: every settle of a step job's final step, or of a parked record, sends
   * one).
   */
  announceSettled(recordId: string): void {
    this.client.publish(this.keys.idempotencyWaitersChannel, settledMessage(recordId)).catch((error: unknown) => {
      if (!this.warnUnannounced()) return;
      this.logger.warn(
        `Deliveries waiting for an idempotency key in other processes or queues will wait for the holder's lease: could not announce it settled (${this.describe(error)}; not repeated for a minute)`,
      );
    });
  }

  /** Whether an announcement that could not be sent is said now (not if one was in the last minute). */
  private warnUnannounced(): boolean {
    const now = Date.now();
    if (now < this.unannouncedWarnedAt + RESUBSCRIBE_MAX_MS) return false;
    this.unannouncedWarnedAt = now;
    return true;
  }

  /** Stops listening (module shutdown). */
  close(): void {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.started = undefined;
    this.failedStarts = 0;
    this.retryAt = 0;
    // Nothing to flush on a subscriber: disconnect, rather than QUIT, which a reconnecting client keeps queued until the
    // server is back (a shutdown during an outage would wait for it).
    subscriber?.disconnect();
  }

  /** An error's message, with what a Redis user refused the channel (ACL) lacks. */
  private describe(error: unknown): string {
    const message = error instanceof Error ? error.message : String(error);
    if (!message.includes('NOPERM')) return message;
    return `${message}: the Redis user needs the channel ${this.keys.idempotencyWaitersChannel}, ACL rule "&${this.keys.idempotencyWaitersChannel}"`;
  }

  private async subscribe(): Promise<void> {
    // A Cluster client duplicates as a Cluster; both are event emitters of the same events.
    const subscriber = (this.client as Redis).duplicate();
    subscriber.on('error', () => undefined); // the library's client reports the outage; the lease bounds the wait
    this.subscriber = subscriber;
    subscriber.on('message', (_channel: string, message: string) => this.heard(message));
    try {
      // Sent once connected: queued before, it would fail at once without an offline queue, or after
      // `maxRetriesPerRequest` reconnections while Redis is down.
      await whenReady(subscriber);
      await subscriber.subscribe(this.keys.idempotencyWaitersChannel);
      if (this.subscriber === subscriber) this.failedStarts = 0;
    } catch (error) {
      if (this.subscriber !== subscriber) return; // closed meanwhile
      // Forgotten, so that a later start tries again on a new connection.
      this.subscriber = undefined;
      this.started = undefined;
      subscriber.disconnect();
      this.failedStarts++;
      const wait =
        this.failedStarts === 1 ? 0 : Math.min(RESUBSCRIBE_MIN_MS * 2 ** (this.failedStarts - 2), RESUBSCRIBE_MAX_MS);
      this.retryAt = Date.now() + wait;
      this.logger.warn(
        `Waiting duplicates of keys in progress will wait for the holder's lease: could not subscribe (${this.describe(error)}); the next key held tries again${wait > 0 ? ` after ${wait} ms` : ''}`,
      );
    }
  }
}

/**
 * Resolves once `client` is ready (connecting a lazy one); rejects when it ends first (its reconnections gave up, or it
 * was closed).
 */
async function whenReady(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return;
  const next = nextReadyOrEnd(client);
  // A lazy client (`lazyConnect`) connects on its first command; its failures reach `end` or its reconnections.
  if (client.status === 'wait') client.connect().catch(() => undefined);
  if ((await next) === 'end') throw new Error('Connection is closed.');
}

/** A delivery waiting for a key in progress elsewhere: its queue (qualified name) and job id. */
export interface Waiter {
  queue: string;
  jobId: string;
}

/** An announcement: a delivery waiting for `recordId`, and the holder it saw ({@link ownerTag}, when it saw one). */
export interface Announcement extends Waiter {
  recordId: string;
  saw?: string;
}

/** What the holder of a key publishes when it settles a key that deliveries of another queue wait for. */
export interface SettledMessage {
  settled: string;
}

/** The message that tells every process the key of `recordId` settled (they wake the deliveries they delayed for it). */
export function settledMessage(recordId: string): string {
  const message: SettledMessage = { settled: recordId };
  return JSON.stringify(message);
}

/**
 * What an announcement says of the owner token a waiting delivery saw (a digest: the channel is not the record), so that
 * the process that just settled the key can tell whether the delivery looked before that settle (it saw the settled
 * owner) or after it (another holder: the key taken again, or a step job's claim handed over to its next delivery).
 */
export function ownerTag(owner: string): string {
  return hash('sha256', owner, 'base64url').slice(0, 22);
}

/**
 * A message heard on the channel, checked (every process of the prefix hears every message, whoever sent it): an
 * announcement or a settle, `undefined` for anything else.
 */
export function parseWaitingMessage(message: string): Announcement | SettledMessage | undefined {
  let heard: unknown;
  try {
    heard = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (typeof heard !== 'object' || heard === null) return undefined;
  const fields = heard as Partial<Announcement> & Partial<SettledMessage>;
  if (typeof fields.settled === 'string') return { settled: fields.settled };
  if (typeof fields.recordId !== 'string' || typeof fields.jobId !== 'string' || typeof fields.queue !== 'string') {
    return undefined;
  }
  const { recordId, queue, jobId, saw } = fields;
  return { recordId, queue, jobId, ...(typeof saw === 'string' ? { saw } : {}) };
}
