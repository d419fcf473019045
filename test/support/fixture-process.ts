// The lifecycle every child-process fixture shares: print {"ready":true} once it serves; on SIGTERM run its close
// steps, print {"closed":true} and exit (reporting anything that keeps it alive 10 s later instead of hanging the
// test); exit non-zero on a startup error.
import { writeSync } from 'node:fs';

/** Prints the ready line and arranges the SIGTERM shutdown: `close` runs the fixture's close steps in order. */
export function serveUntilSigterm(close: () => Promise<void>): void {
  process.once('SIGTERM', () => {
    setTimeout(() => {
      console.error('still running 10 s after close');
      process.exit(3);
    }, 10_000).unref();
    close()
      .then(() => console.log(JSON.stringify({ closed: true })))
      .catch((error: unknown) => {
        console.error(error);
        process.exit(2);
      });
  });
  console.log(JSON.stringify({ ready: true }));
}

/** Runs a fixture's `main`, exiting with status 1 if it fails. */
export function runFixture(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    // stderr is a pipe, written asynchronously: write the reason synchronously, or process.exit() may drop it.
    writeSync(2, `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
