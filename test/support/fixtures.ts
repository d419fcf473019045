// Child-process fixtures (test/fixtures/*.ts, compiled by `npm test` into .build/): start one, wait for the JSON lines
// it prints, kill whatever a test left running.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A JSON line a fixture printed. */
export type Message = Record<string, unknown>;

export interface Fixture {
  child: ChildProcessWithoutNullStreams;
  /** Resolves the first JSON line on stdout that matches. */
  waitFor(match: (message: Message) => boolean): Promise<Message>;
  /** Resolves when the process has exited and its output is read. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

const children = new Set<ChildProcessWithoutNullStreams>();

/** Starts `node .build/test/fixtures/<name>.js` with extra env. */
export function spawnFixture(name: string, env: Record<string, string>): Fixture {
  const file = fileURLToPath(new URL(`../../.build/test/fixtures/${name}.js`, import.meta.url));
  if (!existsSync(file))
    throw new Error(`${file} is missing: run the tests with \`npm test\` (it compiles the fixtures)`);
  const child = spawn(process.execPath, [file], {
    env: { ...process.env, NODE_OPTIONS: '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  const messages: Message[] = [];
  const waiters: { match: (m: Message) => boolean; resolve: (m: Message) => void }[] = [];
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  createInterface({ input: child.stdout }).on('line', (line) => {
    let message: Message;
    try {
      message = JSON.parse(line) as Message;
    } catch {
      return;
    }
    messages.push(message);
    for (const waiter of [...waiters]) {
      if (waiter.match(message)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(message);
      }
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stderr });
    }),
  );
  return {
    child,
    exited,
    waitFor: (match) => {
      const found = messages.find(match);
      if (found) return Promise.resolve(found);
      return Promise.race([
        new Promise<Message>((resolve) => waiters.push({ match, resolve })),
        exited.then(({ code, signal, stderr: err }) => {
          throw new Error(
            `fixture ${name} exited (code ${code}, signal ${signal}) before the expected message:\n${err}`,
          );
        }),
      ]);
    },
  };
}

/** SIGKILLs every fixture still running (call it in afterEach). */
export function killFixtures(): void {
  for (const child of children) child.kill('SIGKILL');
}

/** {@link killFixtures}, resolving once every one has exited (nothing of theirs writes to Redis any more). */
export async function killFixturesAndWait(): Promise<void> {
  const running = [...children].filter((child) => child.exitCode === null && child.signalCode === null);
  const exited = running.map((child) => new Promise<void>((resolve) => child.once('close', () => resolve())));
  killFixtures();
  await Promise.all(exited);
}
