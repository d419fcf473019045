import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

/** A JSON line the app printed (`{"ready":…}`, `{"held":…}`). */
export type AppMessage = Record<string, unknown>;

/** How a process ended. */
export interface AppExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * One process of the sample app (`node main.js` with `ROLE=api` or `ROLE=worker`): its JSON lines, its hold points,
 * its end. Anything else it prints is kept for error messages.
 */
export class AppProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves once the process has exited and its output is read. */
  readonly exited: Promise<AppExit>;
  private readonly messages: AppMessage[] = [];
  private readonly listeners = new Set<() => void>();
  private output = '';
  private exit?: AppExit;

  constructor(
    readonly role: string,
    nodeArgs: readonly string[],
    env: NodeJS.ProcessEnv,
  ) {
    this.child = spawn(process.execPath, nodeArgs, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdin.on('error', () => undefined); // a write to a process that just died
    this.child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.output += chunk));
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      try {
        this.messages.push(JSON.parse(line) as AppMessage);
      } catch {
        this.output += `${line}\n`;
      }
      this.listeners.forEach((listener) => listener());
    });
    this.exited = new Promise((resolve) =>
      this.child.on('close', (code, signal) => {
        this.exit = { code, signal };
        this.listeners.forEach((listener) => listener());
        resolve(this.exit);
      }),
    );
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /**
   * Resolves the first JSON line that matches. Rejects, with the process's output, if it exits first or nothing
   * matches within `timeoutMs`.
   */
  waitFor(what: string, match: (message: AppMessage) => boolean, timeoutMs = 30_000): Promise<AppMessage> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.messages.find(match);
        if (found) done(() => resolve(found));
        else if (this.exit) done(() => reject(this.failure(`exited (${describeExit(this.exit!)}) before ${what}`)));
      };
      const timer = setTimeout(
        () => done(() => reject(this.failure(`did not report ${what} within ${timeoutMs / 1000} s`))),
        timeoutMs,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        settle();
      };
      this.listeners.add(check);
      check();
    });
  }

  /**
   * Resolves when a job of this worker stops at the armed hold point `point` (`SAMPLE_HOLD_POINTS`), with the line it
   * printed (`{"held": point, ...details}`).
   */
  held(point: string, timeoutMs = 30_000): Promise<AppMessage> {
    return this.waitFor(`hold point ${point}`, (message) => message.held === point, timeoutMs);
  }

  /** Lets the job held at `point` go on. */
  release(point: string): void {
    this.child.stdin.write(`release ${point}\n`);
  }

  /** Sends `signal` and resolves how the process ended. */
  kill(signal: NodeJS.Signals): Promise<AppExit> {
    if (!this.exit) this.child.kill(signal);
    return this.exited;
  }

  /** SIGTERM (a graceful shutdown), then SIGKILL if it is still running after `graceMs`. */
  async stop(graceMs = 10_000): Promise<AppExit> {
    if (this.exit) return this.exit;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  private failure(message: string): Error {
    const tail = this.output.trim().split('\n').slice(-20).join('\n');
    return new Error(`the ${this.role} process (pid ${this.pid}) ${message}${tail ? `; its output:\n${tail}` : ''}`);
  }
}

/** `code 0`, `SIGKILL`, … */
export function describeExit(exit: AppExit): string {
  return exit.signal ?? `code ${exit.code}`;
}
