import { connect, createServer, type Server, type Socket } from 'node:net';
import { databaseUrl } from './postgres.js';

/**
 * A TCP proxy in front of the test PostgreSQL server that can cut a connection the moment a client sends a given
 * statement (before the server sees it): `cutOn(/begin/i)` drops the next connection whose client sends text matching
 * it, as a failover or a network cut would during that statement. `terminateAfterReply(pattern)` lets that statement
 * run and delivers its reply and a backend termination (`pg_terminate_backend`'s FATAL 57P01) in one read, as a
 * termination arriving right after a reply does. Connect through `url`; `close()` when done.
 */
export class PgProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  /** The one fault armed (each setter arms one, for the next statement that matches), and what it resolves once done. */
  private fault: { kind: FaultKind; pattern: RegExp; done: () => void } | undefined;

  private constructor() {
    const target = new URL(databaseUrl());
    this.server = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => this.sockets.delete(socket));
      }
      let armed = false;
      let swallowing = false;
      const replies = new MessageFrames();
      let done: (() => void) | undefined;
      client.on('data', (chunk: Buffer) => {
        const fault = this.fault;
        if (!fault?.pattern.test(chunk.toString('latin1'))) {
          upstream.write(chunk);
          return;
        }
        this.fault = undefined;
        if (fault.kind === 'cut') {
          client.destroy();
          upstream.destroy();
          fault.done();
        } else if (fault.kind === 'sendThenCut') {
          // The statement reaches the server (which reads it before the end of the stream); the client hears nothing.
          upstream.end(chunk);
          client.destroy();
          fault.done();
        } else {
          armed = true;
          swallowing = fault.kind === 'swallow';
          done = fault.done;
          upstream.write(chunk);
        }
      });
      upstream.on('data', (chunk: Buffer) => {
        const readyAt = armed ? replies.endOfReadyForQuery(chunk) : (replies.track(chunk), undefined);
        if (readyAt === undefined) {
          client.write(chunk);
          return;
        }
        armed = false;
        upstream.destroy();
        if (swallowing)
          client.destroy(); // the server answered (and did it); the client never hears
        else client.end(Buffer.concat([chunk.subarray(0, readyAt), TERMINATION]));
        done?.();
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  static async start(): Promise<PgProxy> {
    const proxy = new PgProxy();
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** The test database's URL through the proxy. */
  get url(): string {
    const url = new URL(databaseUrl());
    url.hostname = '127.0.0.1';
    url.port = String((this.server.address() as { port: number }).port);
    return url.toString();
  }

  /** Cuts the next connection that sends text matching `pattern`; resolves once it did. */
  cutOn(pattern: RegExp): Promise<void> {
    return this.arm('cut', pattern);
  }

  /**
   * Lets the next statement matching `pattern` run; its reply's ReadyForQuery reaches the client in one chunk with a
   * FATAL 57P01 ErrorResponse, and the connection closes. Resolves once it was sent.
   */
  terminateAfterReply(pattern: RegExp): Promise<void> {
    return this.arm('terminate', pattern);
  }

  /**
   * Lets the next statement matching `pattern` run to its end on the server, then cuts the connection before any of
   * the reply reaches the client (a COMMIT that committed, its answer lost). Resolves once it cut.
   */
  cutBeforeReply(pattern: RegExp): Promise<void> {
    return this.arm('swallow', pattern);
  }

  /**
   * Sends the next statement matching `pattern` to the server and cuts the client's side at once, while the server
   * still runs it (a COMMIT whose answer never comes, its outcome not known yet). Resolves once it cut.
   */
  cutAfterSending(pattern: RegExp): Promise<void> {
    return this.arm('sendThenCut', pattern);
  }

  private arm(kind: FaultKind, pattern: RegExp): Promise<void> {
    return new Promise((done) => (this.fault = { kind, pattern, done }));
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

type FaultKind = 'cut' | 'terminate' | 'swallow' | 'sendThenCut';

/** The ErrorResponse `pg_terminate_backend` makes a backend send before it closes its connection. */
const TERMINATION = errorResponse({
  S: 'FATAL',
  V: 'FATAL',
  C: '57P01',
  M: 'terminating connection due to administrator command',
});

function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([
    ...Object.entries(fields).map(([code, value]) => Buffer.from(`${code}${value}\0`, 'utf8')),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

/** Follows the message boundaries of a server's stream (type byte, int32 length including itself, body). */
class MessageFrames {
  private header = Buffer.alloc(0);
  private remaining = 0;
  private type = '';

  /** Follows `chunk`. */
  track(chunk: Buffer): void {
    this.endOfReadyForQuery(chunk);
  }

  /** Follows `chunk`; answers the offset just past the first ReadyForQuery ('Z') that ends in it, if any. */
  endOfReadyForQuery(chunk: Buffer): number | undefined {
    let at = 0;
    let found: number | undefined;
    while (at < chunk.length) {
      if (this.remaining > 0) {
        const taken = Math.min(this.remaining, chunk.length - at);
        this.remaining -= taken;
        at += taken;
        if (this.remaining === 0 && this.type === 'Z' && found === undefined) found = at;
        continue;
      }
      const needed = 5 - this.header.length;
      this.header = Buffer.concat([this.header, chunk.subarray(at, at + needed)]);
      at += Math.min(needed, chunk.length - at);
      if (this.header.length < 5) break;
      this.type = this.header.toString('latin1', 0, 1);
      this.remaining = this.header.readInt32BE(1) - 4;
      this.header = Buffer.alloc(0);
      if (this.remaining === 0 && this.type === 'Z' && found === undefined) found = at;
    }
    return found;
  }
}
