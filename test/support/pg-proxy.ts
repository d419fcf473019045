import { connect, createServer, type Server, type Socket } from 'node:net';
import { databaseUrl } from './postgres.js';

/**
 * A TCP proxy in front of the test PostgreSQL server that can cut a connection the moment a client sends a given
 * statement (before the server sees it): `cutOn(/begin/i)` drops the next connection whose client sends text matching
 * it, as a failover or a network cut would during that statement. Connect through `url`; `close()` when done.
 */
export class PgProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private pattern: RegExp | undefined;
  private cut: (() => void) | undefined;

  private constructor() {
    const target = new URL(databaseUrl());
    this.server = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => this.sockets.delete(socket));
      }
      client.on('data', (chunk: Buffer) => {
        if (this.pattern?.test(chunk.toString('latin1'))) {
          this.pattern = undefined;
          client.destroy();
          upstream.destroy();
          this.cut?.();
          return;
        }
        upstream.write(chunk);
      });
      upstream.pipe(client);
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
    this.pattern = pattern;
    return new Promise((resolve) => (this.cut = resolve));
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
