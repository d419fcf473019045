import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { RedisLoginRefusedError } from '../errors/redis-login-refused.error.js';
import { isUnreachable, loginRefusal } from './connections.js';

type Client = Redis | Cluster;

/**
 * Follows the login of the library's own connection. A Redis that refuses it is a wrong configuration, not an outage:
 * the library's locks, dead set, idempotency records and reaper all need that connection, while BullMQ's own (another
 * user, another password) may well get through, so that jobs would still flow with the library half working. The
 * refusal holds from Redis' answer until the connection is ready (or the server is out of reach: then it is an outage
 * again, the availability's to report).
 */
export class LoginWatch {
  private refused: string | undefined;
  /** When the refusal was last logged. */
  private loggedAt = 0;

  constructor(
    readonly client: Client,
    private readonly endpoint: string,
    /** Whether `UniqueJobsModule.forRoot` names the connection (else it is BullModule.forRoot's, or the default). */
    private readonly given: boolean,
    private readonly logger: LoggerLike,
    /** How long a refusal that lasts is not logged again (ms). */
    private readonly repeatAfterMs: number,
  ) {
    client.on('ready', () => {
      if (this.refused === undefined) return;
      this.refused = undefined;
      this.logger.log(`Redis ${endpoint} accepts the login of the library's connection again`);
    });
  }

  /**
   * Notes an error of the library's connection; `true` when it is a refused login, logged here: when it starts (the
   * connection was ready, or out of reach, before) and then once every `repeatAfterMs` while it lasts (ioredis tries
   * again every 2 s at most).
   */
  note(error: unknown): boolean {
    const refusal = loginRefusal(error);
    if (refusal === undefined) {
      if (isUnreachable(error)) this.refused = undefined;
      return false;
    }
    const now = Date.now();
    if (this.refused === undefined || now - this.loggedAt >= this.repeatAfterMs) {
      this.loggedAt = now;
      const consequence = `— every enqueue of a unique job fails with RedisLoginRefusedError, and a job whose start needs it in the worker goes back to delayed, until Redis accepts it (repeats within ${this.repeatAfterMs} ms are not logged)`;
      this.logger.error(this.refusedWith(refusal, consequence).message);
    }
    this.refused = refusal;
    return true;
  }

  /** The error of the refused login, with what follows from it; `undefined` while Redis is not known to refuse it. */
  error(consequence: string): RedisLoginRefusedError | undefined {
    return this.refused === undefined ? undefined : this.refusedWith(this.refused, consequence);
  }

  private refusedWith(reply: string, consequence: string): RedisLoginRefusedError {
    const option = this.given
      ? 'UniqueJobsModule.forRoot "connection"'
      : 'UniqueJobsModule.forRoot "connection" not given: BullModule.forRoot\'s connection, else 127.0.0.1:6379';
    return new RedisLoginRefusedError(this.endpoint, userOf(this.client), reply, option, consequence);
  }

  /**
   * At bootstrap: connects a lazy client and resolves the error of a refused login as soon as Redis answers one;
   * `undefined` once the connection is ready, closed, out of reach (that is an outage: the application starts and
   * waits for it), or still not through after `withinMs`.
   */
  settled(withinMs: number, consequence: string): Promise<RedisLoginRefusedError | undefined> {
    const { client } = this;
    if (this.refused !== undefined) return Promise.resolve(this.error(consequence));
    if (client.status === 'ready' || client.status === 'end') return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const done = (reply: string | undefined) => {
        clearTimeout(timer);
        client.off('ready', ready);
        client.off('end', ready);
        client.off('error', failed);
        resolve(reply === undefined ? undefined : this.refusedWith(reply, consequence));
      };
      const ready = () => done(undefined);
      const failed = (error: unknown) => {
        const refusal = loginRefusal(error);
        if (refusal !== undefined || isUnreachable(error)) done(refusal);
      };
      const timer = setTimeout(() => done(undefined), withinMs);
      client.on('ready', ready);
      client.on('end', ready); // closed meanwhile (the application shutting down): nothing left to check
      client.on('error', failed);
      if (client.status === 'wait') client.connect().catch(() => undefined); // its failure comes as an `error` event
    });
  }
}

/** The user a client logs in as: its `username`, else Redis' `default`. */
function userOf(client: Client): string {
  const options = client.isCluster ? (client as Cluster).options.redisOptions : (client as Redis).options;
  return options?.username || 'default';
}
