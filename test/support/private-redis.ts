// A redis-server of a suite's own, on a free port in a temp dir: the only Redis the chaos suite injects faults into
// (CLIENT KILL, SCRIPT FLUSH, DEBUG SLEEP, a kill and restart, a pause), and the quiet server a MONITOR-based suite
// needs. Never the shared 127.0.0.1:6379.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface PrivateRedisOptions {
  /** AOF on, written and fsynced before every reply (`appendfsync always`): a kill loses no acknowledged write. */
  appendonly?: boolean;
  /**
   * Cluster mode, one node holding every slot, for a plain client: it refuses a call naming keys of two hash slots
   * (`CROSSSLOT`), as a proxy in front of shards does.
   */
  clusterEnabled?: boolean;
}

/**
 * Where the data dir goes: tmpfs when there is one (a killed process loses nothing there either, and an fsync costs
 * nothing, where on a disk every write command would wait ~5 ms for it), else the temp dir.
 */
function dataRoot(): string {
  try {
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

/** A redis-server child process; `restart()` kills it and starts it again on the same port and data dir. */
export class PrivateRedis {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** Admin client for fault injection and assertions (reconnects by itself after a kill or restart). */
  readonly admin: Redis;

  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly options: PrivateRedisOptions,
  ) {
    // disconnectTimeout: ioredis' disconnect() of a connection whose socket already closed (a killed server) leaves a timer
    // of that length that keeps the process up (Jest: "did not exit one second after the test run").
    this.admin = new Redis({
      host: '127.0.0.1',
      port,
      maxRetriesPerRequest: null,
      lazyConnect: true,
      disconnectTimeout: 200,
    });
    this.admin.on('error', () => undefined); // killed connections reconnect; commands wait for it
  }

  /** Starts a redis-server and waits until it answers PING. */
  static async start(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
    const redis = new PrivateRedis(
      await freePort(),
      mkdtempSync(join(dataRoot(), 'unique-jobs-chaos-redis-')),
      options,
    );
    await redis.launch();
    await redis.admin.connect();
    return redis;
  }

  /** `redis://127.0.0.1:<port>`: the REDIS_URL of the processes that use it. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  private async launch(): Promise<void> {
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--save',
      '',
      '--appendonly',
      this.options.appendonly ? 'yes' : 'no',
      '--appendfsync',
      'always',
      '--enable-debug-command',
      'yes',
      '--logfile',
      join(this.dir, 'redis.log'),
      ...(this.options.clusterEnabled
        ? ['--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, 'nodes.conf')]
        : []),
    ];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    // Never `disconnect()` a probe whose connection ended (refused: the server not up yet): ioredis would leave a
    // `disconnectTimeout` timer that keeps the process up.
    const probe = new Redis({
      host: '127.0.0.1',
      port: this.port,
      lazyConnect: true,
      retryStrategy: () => null,
      disconnectTimeout: 200,
    });
    const drop = () => probe.status !== 'end' && probe.disconnect();
    probe.on('error', () => undefined);
    try {
      for (let i = 0; i < 200; i++) {
        try {
          if (probe.status !== 'ready') await probe.connect();
          // Loading the AOF answers -LOADING until done.
          if ((await probe.ping()) === 'PONG') return;
        } catch {
          drop();
        }
        await sleep(50);
      }
      throw new Error(`redis-server did not start on port ${this.port} (see ${join(this.dir, 'redis.log')})`);
    } finally {
      drop();
    }
  }

  /**
   * Kills the server (SIGKILL: no shutdown, no final AOF rewrite) and starts it again on the same port and data dir,
   * where it reloads its AOF. Resolves how long it was down (ms).
   */
  async restart(): Promise<number> {
    const down = Date.now();
    await this.kill();
    await this.relaunch();
    return Date.now() - down;
  }

  /** Kills the server (SIGKILL); its port stays free until {@link relaunch}. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  /**
   * Stops the server's process (SIGSTOP): its connections stay open and the kernel still accepts new ones, but nothing
   * is answered until {@link resume}.
   */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  /** Lets a paused server go on (SIGCONT); nothing if it is not paused. */
  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** Starts a killed server again on the same port and data dir. */
  relaunch(): Promise<void> {
    return this.launch();
  }

  /** Stops the server and deletes its data dir. */
  async stop(): Promise<void> {
    this.admin.disconnect();
    this.child?.kill('SIGKILL');
    await this.exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
