/** Exit codes of the `unique-jobs` CLI. */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** A usage error, an invalid argument, or an action that could not be done (nothing found, lock still held). */
  failed: 1,
  /** Redis could not be reached. */
  unreachable: 2,
} as const;

/** An error the CLI reports in one line (and with the usage text when `usage` is set), exiting with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    /** The process exit code. */
    readonly exitCode: number = EXIT.failed,
    /** Print the usage text after the message. */
    readonly usage = false,
    /** Fields added to the `--json` error object besides `message` and `exitCode` (where the command looked). */
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
    this.name = 'CliError';
  }
}
