import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';

type Client = Redis | Cluster;

/**
 * The outages of the servers the followed clients connect to: one log line when a server becomes unreachable and one
 * when it is back (not a line per reconnect attempt), and which errors speak of an outage that has already ended.
 */
export class ServerOutages {
  /** Servers out of reach now: since when. */
  private readonly since = new Map<string, number>();
  /** Per server, how many outages have ended; per client, that count at its last `ready`. */
  private readonly epochs = new Map<string, number>();
  private readonly readyIn = new WeakMap<Client, number>();

  constructor(
    /** Every live client followed, and its server. */
    private readonly known: ReadonlyMap<Client, string>,
    private readonly logger: LoggerLike,
    /** How long an enqueue waits for a connection that is not ready (ms; `false`: as long as it takes), as logged. */
    private readonly enqueueTimeout: number | false,
    /** An outage of the server started or ended. */
    private readonly changed: (endpoint: string) => void,
  ) {}

  /** Since when `endpoint` is out of reach; `undefined` when it is not. */
  sinceOf(endpoint: string): number | undefined {
    return this.since.get(endpoint);
  }

  /** `client` of `endpoint` is ready: it has seen every outage of its server that has ended so far. */
  ready(client: Client, endpoint: string): void {
    this.readyIn.set(client, this.epochs.get(endpoint) ?? 0);
  }

  /**
   * An "unreachable" error (`text`) from `source` (a client; `undefined`: an owner whose clients are not followed one
   * by one) starts an outage of `endpoint`, logged once, unless one is under way. A client that has not been ready
   * since the last outage ended speaks of that outage (its old socket failing late) while another client of the server
   * is ready: no outage then.
   */
  unreachable(endpoint: string, text: string, source: Client | undefined): void {
    if (this.since.has(endpoint)) return;
    if (source && (this.readyIn.get(source) ?? 0) < (this.epochs.get(endpoint) ?? 0) && this.anyReady(endpoint)) return;
    this.since.set(endpoint, Date.now());
    this.changed(endpoint);
    const wait = this.enqueueTimeout === false ? 'wait for it' : `fail after ${this.enqueueTimeout} ms`;
    this.logger.error(
      `Redis ${endpoint} is unreachable (${text}): enqueues through the library ${wait}, workers wait for it; logged once until it is back`,
    );
  }

  /** A client of `endpoint` is ready: the outage under way, if any, ends (logged). */
  reachable(endpoint: string): void {
    const since = this.since.get(endpoint);
    if (since === undefined) return;
    this.since.delete(endpoint);
    this.changed(endpoint);
    this.epochs.set(endpoint, (this.epochs.get(endpoint) ?? 0) + 1);
    this.logger.log(`Redis ${endpoint} is reachable again, after ${Date.now() - since} ms`);
  }

  /** Whether `endpoint` answers: no outage of it under way, and another known client of it is ready now. */
  answersElsewhere(endpoint: string): boolean {
    return !this.since.has(endpoint) && this.anyReady(endpoint);
  }

  /** Whether a known client of `endpoint` is ready now. */
  private anyReady(endpoint: string): boolean {
    for (const [client, at] of this.known) if (at === endpoint && client.status === 'ready') return true;
    return false;
  }
}
