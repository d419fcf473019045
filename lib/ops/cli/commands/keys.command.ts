import {
  defaultIdempotencyScope,
  describeMatch,
  lookUpStored,
  normalizeIdempotencyScope,
} from '../../../idempotency/stored-key.js';
import { RedisIdempotencyStore } from '../../../idempotency/stores/redis-idempotency.store.js';
import { noMoreThan, required } from '../args.js';
import type { CliContext } from '../cli-context.js';
import { CliError, EXIT } from '../errors/cli.error.js';
import { DEFAULT_IDEMPOTENCY_TABLE } from '../../../idempotency/sql/sql-records.js';
import { ago, clean, duration, iso, truncate } from '../output.js';
import { elsewhereText, lookElsewhere, quoted } from '../where.js';

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
  const values = context.args.values;
  noMoreThan(rest, 1, 'keys show takes one key a call (quote a key holding spaces)');
  const raw =
    values['key-json'] === undefined
      ? required(rest, 0, 'idempotency key: keys show <key> (--scope <scope> | --queue <queue> --name <name>)')
      : jsonString(values['key-json'], '--key-json', rest.length > 0 ? '<key>' : undefined);
  const given =
    values['scope-json'] === undefined
      ? values.scope
      : jsonString(values['scope-json'], '--scope-json', values.scope === undefined ? undefined : '--scope');
  const { queue, name } = values;
  if (given === undefined && (queue === undefined || name === undefined)) {
    throw new CliError(
      'keys show needs the key\'s scope: --scope <scope>, or --queue <queue> --name <job name> (the default scope "queue:name", led by ":" and --bull-prefix when it is not bull)',
      EXIT.failed,
      true,
    );
  }
  // As the library stores them: long, `sha256:`-prefixed or unstorable (NUL, lone surrogate) text is stored hashed.
  // A stored hashed form pasted from a record, an event or a log line is also looked up as it is (storedFormsOf).
  const givenScope = given ?? defaultIdempotencyScope({ queueName: queue!, name: name!, prefix: context.bullPrefix });
  const client = await context.redis();
  const store = new RedisIdempotencyStore({ client, prefix: context.prefix });
  const { scope, key, record, matchedAs } = await lookUpStored(store, givenScope, raw);
  const recordKey = store.recordKey(scope, key);
  const searched = {
    redis: context.redisLabel,
    store: 'redis',
    prefix: context.prefix,
    keys: [recordKey],
  };
  if (!record) {
    const notSearched = [sqlStoreNotice(scope, key)];
    const elsewhere = await lookElsewhere(context, ['idempotency'], {
      underPrefix: (prefix) => [new RedisIdempotencyStore({ client, prefix }).recordKey(scope, key)],
      // A scope built from --queue and --name is led by --bull-prefix: the same queue under another BullMQ prefix
      // (found by its meta key) has its records under another scope, which --bull-prefix finds.
      inQueue:
        given === undefined
          ? (found) =>
              found.queue === queue && found.bullPrefix !== context.bullPrefix
                ? [
                    store.recordKey(
                      normalizeIdempotencyScope(
                        defaultIdempotencyScope({ queueName: queue, name: name!, prefix: found.bullPrefix }),
                      ),
                      key,
                    ),
                  ]
                : []
          : undefined,
    });
    context.print({ scope, key, found: false, record: null, searched, notSearched, elsewhere }, () =>
      [
        `No live record for key ${clean(truncate(key, 120))} in scope ${clean(scope)} in the Redis idempotency store under prefix ${quoted(context.prefix)} (key ${clean(recordKey)}), on ${context.redisLabel}.`,
        `Idempotency records kept in a SQL store (@IdempotencyKey({ store: 'sql' }): PostgresIdempotencyStore, SqliteIdempotencyStore) are not visible to this CLI: query table ${notSearched[0].table} (or the \`table\` option of your store):`,
        `  ${clean(truncate(notSearched[0].query, 400))}`,
        ...elsewhereText(elsewhere),
      ].join('\n'),
    );
    return EXIT.ok;
  }
  const now = await context.serverNow(); // the record's times are on Redis' clock
  context.print({ scope, key, found: true, matchedAs, record, searched }, () => {
    const left = record.expiresAt - now;
    // Each value after its label, in one column (the longest label, "Fingerprint", and a space).
    const row = (label: string, value: string) => `${label.padEnd(12)}${value}`;
    const lines = [
      row('Key', clean(record.key)),
      row('Scope', clean(record.scope)),
      row('Matched', describeMatch(matchedAs)),
      row('State', clean(record.state)),
      row('Job', clean(record.jobId)),
      row('Attempts', String(record.attempts)),
      row('Created', `${iso(record.createdAt)} (${ago(record.createdAt, now)})`),
      row(
        record.state === 'in_progress' ? 'Lease until' : 'Kept until',
        `${iso(record.expiresAt)} (${left > 0 ? `in ${duration(left)}` : 'now'})`,
      ),
      row('Fingerprint', clean(record.fingerprint)),
    ];
    if (record.result !== undefined) lines.push(row('Result', clean(truncate(record.result, 500))));
    if (record.error !== undefined) lines.push(row('Error', clean(truncate(record.error, 500))));
    return lines.join('\n');
  });
  return EXIT.ok;
}

/**
 * A key or scope given as a JSON string (`--key-json`, `--scope-json`): the way to name one holding a character a
 * command line cannot carry (NUL) or that is not well-formed Unicode (a lone surrogate).
 */
function jsonString(text: string, option: string, conflicting: string | undefined): string {
  if (conflicting !== undefined) throw new CliError(`Use ${conflicting} or ${option}, not both`, EXIT.failed, true);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CliError(`${option} must be a JSON string: ${(error as Error).message}`, EXIT.failed, true);
  }
  if (typeof value !== 'string' || value === '') {
    throw new CliError(`${option} must be a non-empty JSON string, e.g. '"evt_1"' (got ${text})`, EXIT.failed, true);
  }
  return value;
}

/** What `keys show` says about the SQL stores, which it cannot reach. */
export interface SqlStoreNotice {
  /** The kind of store not searched. */
  store: 'sql';
  /** Why. */
  reason: string;
  /** The default table of the SQL stores. */
  table: string;
  /** A query that reads the record from that table (PostgreSQL and SQLite alike). */
  query: string;
}

function sqlStoreNotice(scope: string, key: string): SqlStoreNotice {
  const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;
  return {
    store: 'sql',
    reason:
      'idempotency records kept in a SQL store (PostgresIdempotencyStore, SqliteIdempotencyStore) are not visible to this CLI, which reads Redis only',
    table: DEFAULT_IDEMPOTENCY_TABLE,
    query: `SELECT * FROM ${DEFAULT_IDEMPOTENCY_TABLE} WHERE scope = ${literal(scope)} AND key = ${literal(key)};`,
  };
}
