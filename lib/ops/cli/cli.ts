import { UniqueJobsError } from '../../errors/unique-jobs.error.js';
import { parseCliArgs } from './args.js';
import { CliContext } from './cli-context.js';
import { CliError, EXIT } from './errors/cli.error.js';
import { clean, processIo, toJson, type CliIo } from './output.js';
import { USAGE } from './usage.js';
import { asError } from '../../errors/thrown.js';

/** A command: runs with the context and its own positional arguments; resolves the exit code. */
export type CliCommand = (context: CliContext, args: readonly string[]) => Promise<number>;

/** Each command's module, loaded when it runs (a command does not pay for the others' dependencies). */
const COMMANDS: Readonly<Record<string, () => Promise<CliCommand>>> = {
  locks: async () => (await import('./commands/locks.command.js')).locksCommand,
  dead: async () => (await import('./commands/dead.command.js')).deadCommand,
  keys: async () => (await import('./commands/keys.command.js')).keysCommand,
  reap: async () => (await import('./commands/reap.command.js')).reapCommand,
  digest: async () => (await import('./commands/digest.command.js')).digestCommand,
};

/**
 * Runs the `unique-jobs` command line (`argv` without `node` and the script) and resolves the exit code: 0 done
 * (including a lookup that found nothing), 1 a usage error or a change that could not be made, 2 Redis unreachable. Never throws; closes every connection it opened.
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let context: CliContext | undefined;
  const json = argv.includes('--json');
  try {
    const args = parseCliArgs(argv);
    const [name, ...rest] = args.positionals;
    if (args.values.help || name === 'help') {
      io.out(USAGE);
      return EXIT.ok;
    }
    if (name === undefined) throw new CliError('Missing command', EXIT.failed, true);
    const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!load) throw new CliError(`Unknown command ${JSON.stringify(name)}`, EXIT.failed, true);
    context = new CliContext(args, io);
    return await (
      await load()
    )(context, rest);
  } catch (error) {
    const failure = asCliError(error, context);
    if (json) {
      io.err(toJson({ error: { message: failure.message, exitCode: failure.exitCode, ...failure.details } }));
    } else {
      // Messages quote what Redis holds (a dead-set entry's queue, a prefix found in key names), some through
      // JSON.stringify, which leaves C1 controls (U+0080–U+009F: CSI, NEL) and U+2028/U+2029 raw: escaped line by line.
      io.err(`unique-jobs: ${failure.message.split('\n').map(clean).join('\n')}`);
      if (failure.usage) io.err(`\n${USAGE}`);
    }
    return failure.exitCode;
  } finally {
    await context?.close();
  }
}

/** Every failure as a one-line CLI error: the library's errors by their message, lost connections with exit code 2. */
function asCliError(error: unknown, context: CliContext | undefined): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof UniqueJobsError) return new CliError(error.message);
  if (context && isConnectionError(error)) return context.unreachable(error);
  const message = asError(error).message;
  return new CliError(`Unexpected error: ${message}`);
}

/** Errors ioredis raises when the connection is lost or refused. */
function isConnectionError(error: unknown): boolean {
  const { message = '', code = '' } = (error ?? {}) as { message?: string; code?: string };
  return (
    /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE/.test(`${code} ${message}`) ||
    /Connection is closed|connect ETIMEDOUT|Reached the max retries|Stream isn't writeable|Failed to refresh slots|Command timed out/i.test(
      message,
    )
  );
}
