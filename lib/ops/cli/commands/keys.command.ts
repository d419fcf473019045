import { hash } from 'node:crypto';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../../../idempotency/idempotency-options.js';
import { RedisIdempotencyStore } from '../../../idempotency/stores/redis-idempotency.store.js';
import { required } from '../args.js';
import type { CliContext } from '../cli-context.js';
import { CliError, EXIT } from '../errors/cli.error.js';
import { ago, clean, duration, iso, truncate } from '../output.js';

/** `keys show <key>`: an idempotency record of the Redis store. */
export async function keysCommand(context: CliContext, args: readonly string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'show') {
    throw new CliError(
      sub === undefined ? 'Missing subcommand: keys show <key>' : `Unknown subcommand "keys ${sub}"`,
      EXIT.failed,
      true,
    );
  }
  const raw = required(rest, 0, 'idempotency key: keys show <key> (--scope <scope> | --queue <queue> --name <name>)');
  const { scope: given, queue, name } = context.args.values;
  if (given === undefined && (queue === undefined || name === undefined)) {
    throw new CliError(
      'keys show needs the key\'s scope: --scope <scope>, or --queue <queue> --name <job name> (the default scope "queue:name")',
      EXIT.failed,
      true,
    );
  }
  const scope = given ?? `${queue}:${name}`;
  // As the library stores it: a key longer than the maximum is stored as its hash.
  const key = raw.length <= MAX_IDEMPOTENCY_KEY_LENGTH ? raw : `sha256:${hash('sha256', raw, 'hex')}`;
  const store = new RedisIdempotencyStore({ client: await context.redis(), prefix: context.prefix });
  const record = await store.get(scope, key);
  context.print({ scope, key, found: record !== undefined, record: record ?? null }, () => {
    if (!record) return `No live record for key ${clean(truncate(key, 120))} in scope ${clean(scope)}.`;
    const now = Date.now();
    const left = record.expiresAt - now;
    const lines = [
      `Key       ${clean(record.key)}`,
      `Scope     ${clean(record.scope)}`,
      `State     ${clean(record.state)}`,
      `Job       ${clean(record.jobId)}`,
      `Attempts  ${record.attempts}`,
      `Created   ${iso(record.createdAt)} (${ago(record.createdAt, now)})`,
      `${record.state === 'in_progress' ? 'Lease' : 'Kept'}     until ${iso(record.expiresAt)} (${left > 0 ? `in ${duration(left)}` : 'now'})`,
      `Fingerprint ${clean(record.fingerprint)}`,
    ];
    if (record.result !== undefined) lines.push(`Result    ${clean(truncate(record.result, 500))}`);
    if (record.error !== undefined) lines.push(`Error     ${clean(truncate(record.error, 500))}`);
    return lines.join('\n');
  });
  return EXIT.ok;
}
