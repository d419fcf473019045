import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { RedisUnavailableError } from '../errors/redis-unavailable.error.js';
import type { RedisLoginRefusedError } from '../errors/redis-login-refused.error.js';
import { nextReadyOrEnd } from './client-ready.js';
import { describeConnection, isClient, isUnreachable } from './connections.js';
import { LoginWatch } from './login-watch.js';
import { ReadyWaits } from './ready-waits.js';
import { ServerOutages } from './server-outages.js';
import { releaseAtShutdown } from './shutdown-release.js';

type Client = Redis | Cluster;

/** A BullMQ queue or worker, as far as its connection is concerned. */
export interface ConnectionOwner {
  readonly opts: { connection?: unknown };
  getBackend(): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/**
 * Follows the Redis connections of guarded queues, workers and the library's own client: one log line when a server
 * becomes unreachable and one when it is back (not a line per reconnect attempt), and a bounded wait for an enqueue
 * whose queue has no ready connection, after which it fails with {@link RedisUnavailableError} having sent nothing.
 */
export class RedisAvailability {
  private readonly watched = new WeakSet<object>();
  private readonly clients = new WeakMap<object, Client>();
  /** Each owner's main client as BullMQ created it, followed before its first connection (which may never come). */
  private readonly mainClients = new WeakMap<object, Client>();
  private readonly firstConnection = new WeakMap<object, Promise<Client | undefined>>();
  private readonly nextReady = new WeakMap<Client, Promise<'ready' | 'end'>>();
  private readonly endpoints = new WeakMap<object, string>();
  /** The outages of the servers: since when, logged as they start and end. */
  private readonly outages: ServerOutages;
  private readonly lastErrors = new Map<string, string>();
  /** Per client, its last error since it was last ready, and whether it was a network one ("unreachable"). */
  private readonly clientErrors = new WeakMap<Client, { text: string; unreachable: boolean }>();
  /**
   * Per server, the last error other than "unreachable" that was logged and when: the same text is not logged again
   * for `repeatAfterMs`, unless a client of the server is ready or an outage starts or ends in between.
   */
  private readonly lastOther = new Map<string, { text: string; at: number }>();
  /** Every live client of the watched queues and workers (their main and blocking connections) and the library's own. */
  private readonly known = new Map<Client, string>();
  /** Every client listened to (whether it has ended since or not). */
  private readonly followed = new WeakSet<Client>();
  /**
   * Clients known to run no blocking command (the library's own, BullMQ's non-blocking connections), and clients seen
   * as (or not known not to be) blocking ones: only a client in the first set and not the second is probed at shutdown.
   */
  private readonly nonBlocking = new WeakSet<Client>();
  private readonly blocking = new WeakSet<Client>();
  /** Enqueues waiting for a connection (its first, or its next `ready`). */
  private readonly waits = new ReadyWaits<'ready' | 'end'>();
  private letGo = false;
  /** The login of the library's own connection. */
  private login: LoginWatch | undefined;

  constructor(
    private readonly logger: LoggerLike,
    /** How long an enqueue waits for a connection that is not ready (ms); `false`: as long as it takes. */
    readonly enqueueTimeout: number | false,
    /** How long the same error (other than "unreachable") of one server is not logged again (ms). */
    private readonly repeatAfterMs = 60_000,
  ) {
    const changed = (endpoint: string) => void this.lastOther.delete(endpoint); // other errors are logged anew
    this.outages = new ServerOutages(this.known, logger, enqueueTimeout, changed);
  }

  /** Follows the connections of a queue, worker, `QueueEvents` or `FlowProducer` (idempotent). */
  watch(owner: ConnectionOwner): void {
    if (this.watched.has(owner)) return;
    this.watched.add(owner);
    const endpoint = describeConnection(owner.opts.connection);
    this.endpoints.set(owner, endpoint);
    const backend = owner.getBackend() as
      { client?: unknown; connection?: unknown; blockingConnection?: unknown } | undefined;
    // Every client of the owner now, a connection that never connected included (its `client` promise waits for the
    // first connection): the main one and a worker's blocking one, as BullMQ's connections hold them.
    let followed = 0;
    for (const connection of [backend?.connection, backend?.blockingConnection]) {
      const client = (connection as { _client?: unknown } | undefined)?._client;
      if (!isClient(client)) continue;
      followed += this.follow(client, endpoint, false);
      this.noteRole(client, connection);
      if (connection === backend?.connection) this.mainClients.set(owner, client);
    }
    // The owner's own `error` event repeats its clients' errors (and adds its own): it decides outages only when its
    // clients could not be followed one by one.
    owner.on('error', (error) => this.failed(endpoint, error, followed > 0 ? 'noted' : undefined));
    const first = Promise.resolve(backend?.client).then(
      (client) => (isClient(client) ? client : undefined),
      () => undefined,
    );
    this.firstConnection.set(owner, first);
    void first.then((client) => {
      if (!client) return;
      this.clients.set(owner, client);
      this.follow(client, endpoint, false);
      this.noteRole(client, backend?.connection);
      this.outages.reachable(endpoint);
    });
  }

  /**
   * Follows the library's own client (which otherwise has no `error` listener: ioredis would print every attempt), and
   * its login. `given`: `UniqueJobsModule.forRoot` names the connection (a refused login names the option it comes
   * from).
   */
  watchClient(client: Client, given = true): void {
    if (this.watched.has(client)) return;
    this.watched.add(client);
    this.nonBlocking.add(client);
    const endpoint = describeConnection(client);
    this.login ??= new LoginWatch(client, endpoint, given, this.logger, this.repeatAfterMs);
    this.follow(client, endpoint, true);
  }

  /**
   * The error an enqueue of a unique job fails with, having sent nothing, while Redis refuses the login of the library's
   * connection (its locks, dead set and records cannot be written); `undefined` otherwise.
   */
  loginRefused(): RedisLoginRefusedError | undefined {
    return this.login?.error(
      '— the enqueue sent nothing: every enqueue of a unique job fails so until Redis accepts the login',
    );
  }

  /**
   * At bootstrap: the error of a refused login of the library's connection, as soon as Redis answers it; `undefined`
   * when it is ready, out of reach (an outage: the application starts and waits for it) or silent for `withinMs`.
   */
  loginSettled(withinMs: number): Promise<RedisLoginRefusedError | undefined> {
    return (
      this.login?.settled(
        withinMs,
        '— the application does not start: give that connection the username and password of an ACL user that exists and is enabled (docs/operations.md, "What the library needs of Redis")',
      ) ?? Promise.resolve(undefined)
    );
  }

  /**
   * Whether `client`, of BullMQ's `connection`, runs blocking commands (a worker's `BZPOPMIN`, a `QueueEvents`'
   * `XREAD BLOCK`): as BullMQ created the connection (internals, read defensively: not known as non-blocking, it is
   * taken as blocking).
   */
  private noteRole(client: Client, connection: unknown): void {
    const options = (connection as { extraOptions?: { blocking?: unknown } } | undefined)?.extraOptions;
    (options?.blocking === false ? this.nonBlocking : this.blocking).add(client);
  }

  /**
   * Listens to one client's errors and readiness (once per client, however many owners share it); 1: it is followed.
   * `logsOthers`: its errors other than "unreachable" are logged here (an owner's clients' are logged from the owner's
   * `error` event).
   */
  private follow(client: Client, endpoint: string, logsOthers: boolean): number {
    if (this.followed.has(client)) return 1;
    this.followed.add(client);
    this.known.set(client, endpoint);
    client.on('error', (error: Error) => {
      this.clientErrors.set(client, { text: error?.message ?? String(error), unreachable: isUnreachable(error) });
      this.failed(endpoint, error, client, logsOthers);
    });
    client.on('ready', () => {
      this.clientErrors.delete(client);
      this.lastOther.delete(endpoint);
      this.outages.reachable(endpoint);
      this.outages.ready(client, endpoint);
    });
    // A closed client (a temporary queue's, quit) is not held: the map follows the live ones only. One connected anew
    // (BullMQ does, after a stuck blocking read or a lost cluster) is followed from its first attempt, so that the
    // shutdown lets it go if it never gets through.
    client.on('end', () => this.known.delete(client));
    client.on('connecting', () => this.known.set(client, endpoint));
    return 1;
  }

  /**
   * `undefined` when the owner's connection is ready (or unknown to this watcher): go ahead. Otherwise a promise that
   * resolves once it is ready, or rejects with {@link RedisUnavailableError} after `enqueueTimeout`. A connection that
   * has ended (closed: `queue.close()`, the application's shutdown, or reconnections that gave up) will not be ready
   * again: that rejects at once, with ioredis' own "Connection is closed." (what BullMQ's `add` throws then).
   */
  ready(owner: ConnectionOwner): Promise<void> | undefined {
    if (this.enqueueTimeout === false || !this.watched.has(owner)) return undefined;
    const client = this.clients.get(owner);
    if (client?.status === 'ready') return undefined;
    const endpoint = this.endpoints.get(owner)!;
    if (client?.status === 'end') return Promise.reject(closedError(endpoint));
    const timeout = this.enqueueTimeout;
    return new Promise<void>((resolve, reject) => {
      const settled = (state: 'ready' | 'end') => {
        clearTimeout(timer);
        if (state === 'ready') resolve();
        else reject(closedError(endpoint));
      };
      // One reaction per connection, however many enqueues wait: one that gives up keeps nothing (ready-waits.ts).
      const forget = client
        ? this.waits.wait(client, () => this.readyOf(client), settled)
        : this.waits.wait(owner, () => this.firstConnection.get(owner)!.then(() => 'ready' as const), settled);
      const timer = setTimeout(() => {
        forget();
        // The connection's own last error when it had one: a refused login of its own (WRONGPASS) is no reconnection
        // under way, whatever the other connections of the server do.
        const main = client ?? this.mainClients.get(owner);
        const own = main && this.clientErrors.get(main);
        const elsewhere = (own?.unreachable ?? true) && this.outages.answersElsewhere(endpoint);
        reject(new RedisUnavailableError(endpoint, timeout, own?.text ?? this.lastErrors.get(endpoint), elsewhere));
      }, timeout);
    });
  }

  /**
   * The application is shutting down: a connection that stays out of reach for `timeoutMs`, or whose server keeps it
   * open but answers no `PING` for `timeoutMs`, is let go, so that closing the queues, workers and the library's client
   * does not wait for Redis forever (see {@link releaseAtShutdown}).
   */
  closeUnreachableAfter(timeoutMs: number | false, handlersRunning: () => boolean = () => false): void {
    const outageSince = (endpoint: string) => this.outages.sinceOf(endpoint);
    const probeable = (client: Client) => this.nonBlocking.has(client) && !this.blocking.has(client);
    const silence = { probeable, handlersRunning };
    releaseAtShutdown(this.known, outageSince, silence, this.logger, timeoutMs, () => (this.letGo = true));
  }

  /** Whether the shutdown let go of a connection (what was still queued on it failed with "Connection is closed"). */
  get connectionsLetGo(): boolean {
    return this.letGo;
  }

  /**
   * Resolves at the client's next `ready`, or `end` (closed: it will not be ready again) if that comes first (one
   * listener of each per client, however many enqueues wait).
   */
  private readyOf(client: Client): Promise<'ready' | 'end'> {
    let next = this.nextReady.get(client);
    if (!next) {
      next = nextReadyOrEnd(client);
      this.nextReady.set(client, next);
      void next.then(() => this.nextReady.delete(client));
    }
    return next;
  }

  /**
   * An error from `source` (a client, or `'noted'`: an owner's repetition of its clients' errors). A client that has not
   * been ready since the last outage ended speaks of that outage (its old socket failing late) while another client of
   * the server is ready: no new line then. With none ready, the server is out of reach again, and that is logged.
   */
  private failed(endpoint: string, error: Error, source?: Client | 'noted', logsOthers = true): void {
    const text = error?.message ?? String(error);
    // A refused login of the library's own connection is a wrong configuration, which its watch logs, naming the option
    // (queues sharing the client repeat it: not logged again).
    if (this.login && source === this.login.client && this.login.note(error)) {
      this.lastOther.set(endpoint, { text, at: Date.now() });
      return;
    }
    if (!isUnreachable(error)) {
      // One client shared by several queues reaches this once per queue, and a refused login once per reconnect.
      const last = this.lastOther.get(endpoint);
      const now = Date.now();
      if (!logsOthers || (last?.text === text && now - last.at < this.repeatAfterMs)) return;
      this.lastOther.set(endpoint, { text, at: now });
      this.logger.error(`Redis ${endpoint}: ${text} (repeats within ${this.repeatAfterMs} ms are not logged)`);
      return;
    }
    this.lastErrors.set(endpoint, text);
    if (source !== 'noted') this.outages.unreachable(endpoint, text, source);
  }
}

/**
 * The error of an enqueue whose queue's connection has ended: ioredis' own message (BullMQ's `add` throws it then, and
 * callers match it), naming the server; nothing was sent.
 */
function closedError(endpoint: string): Error {
  return new Error(
    `Connection is closed. (Redis ${endpoint}: the queue's connection has ended: closed by queue.close() or the application's shutdown, or its reconnections gave up; the enqueue sent nothing)`,
  );
}
