import { digest, lockKey } from '../../../digest/digest.js';
import { UnserializableLockArgsError } from '../../../errors/unserializable-lock-args.error.js';
import { LOCKS } from '../../../locks/index.js';
import { integerOption, lockOption, required, uniqueAcrossOption } from '../args.js';
import type { CliContext } from '../cli-context.js';
import { CliError, EXIT } from '../errors/cli.error.js';

/**
 * `digest <queue> <name> <json>`: the digest a job with this data gets and the keys of its locks, computed as the
 * library does (lib/digest/digest.ts). `--lock-args a,b.c` stands for `lockArgs: (data) => [data.a, data.b.c]`,
 * `--lock-args-json` for any other value a `lockArgs` function returns; without either the whole data decides. Needs
 * no Redis.
 */
export async function digestCommand(context: CliContext, args: readonly string[]): Promise<number> {
  const queue = required(args, 0, 'queue: digest <queue> <name> <json>');
  const name = required(args, 1, 'job name: digest <queue> <name> <json>');
  const data = parseJson(required(args, 2, 'job data (JSON): digest <queue> <name> <json>'), 'job data');
  if (args.length > 3) throw new CliError(`Unexpected argument ${JSON.stringify(args[3])} (quote the JSON data)`);
  const { values } = context.args;
  if (values['lock-args'] !== undefined && values['lock-args-json'] !== undefined) {
    throw new CliError('Use --lock-args or --lock-args-json, not both');
  }
  let lockArgs: unknown = data;
  let picked = false;
  if (values['lock-args'] !== undefined) {
    lockArgs = pickFields(data, values['lock-args']);
    picked = true;
  } else if (values['lock-args-json'] !== undefined) {
    lockArgs = parseJson(values['lock-args-json'], '--lock-args-json');
    picked = true;
  }
  const lock = lockOption(values.lock);
  const lockLimit = integerOption('lock-limit', values['lock-limit'], 1, 1, 1_000_000);
  const uniqueAcross = uniqueAcrossOption(values['unique-across']);
  const input = { queue, queuePrefix: context.bullPrefix, name, lockArgs, picked, uniqueAcross, lock, lockLimit };
  const where = { prefix: context.prefix };
  let value: string;
  try {
    value = digest(input);
  } catch (error) {
    if (error instanceof UnserializableLockArgsError) throw new CliError(error.message);
    throw error;
  }
  const result = {
    digest: value,
    lock,
    ...(LOCKS[lock].locksAtEnqueue ? { enqueueLockKey: lockKey({ ...input, ...where }) } : {}),
    ...(LOCKS[lock].locksWhileRunning ? { runtimeLockKey: lockKey({ ...input, ...where, kind: 'runtime' }) } : {}),
  };
  context.print(result, () =>
    [
      value,
      ...(result.enqueueLockKey ? [`enqueue lock  ${result.enqueueLockKey}`] : []),
      ...(result.runtimeLockKey ? [`run-time lock ${result.runtimeLockKey}`] : []),
    ].join('\n'),
  );
  return EXIT.ok;
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new CliError(`${what} must be JSON: ${(error as Error).message}`);
  }
}

/** `a,b.c` → `[data.a, data.b.c]`; a field that is missing is an error (the library rejects it too). */
function pickFields(data: unknown, list: string): unknown[] {
  const paths = list.split(',').map((path) => path.trim());
  return paths.map((path) => {
    if (!/^[^.\s]+(\.[^.\s]+)*$/.test(path))
      throw new CliError(`--lock-args: invalid field path ${JSON.stringify(path)}`);
    let value: unknown = data;
    for (const part of path.split('.')) {
      value =
        value !== null && typeof value === 'object' && Object.hasOwn(value, part)
          ? (value as Record<string, unknown>)[part]
          : undefined;
    }
    if (value === undefined) throw new CliError(`--lock-args: the job data has no field ${JSON.stringify(path)}`);
    return value;
  });
}
