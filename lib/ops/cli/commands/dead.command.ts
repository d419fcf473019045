import { DeadSetService } from '../../../dead-set/dead-set.service.js';
import type { DeadSetEntry } from '../../../dead-set/dead-set-entry.interface.js';
import { TruncatedDeadSetEntryError } from '../../../errors/truncated-dead-set-entry.error.js';
import { UniqueJobsKeys } from '../../../redis/keys.js';
import { RedisScripts } from '../../../redis/redis-scripts.js';
import { integerOption, noMoreThan, required } from '../args.js';
import type { CliContext } from '../cli-context.js';
import { CliError, EXIT } from '../errors/cli.error.js';
import { jsonText } from '../../../common/json-text.js';
import { clean, iso, table, truncate } from '../output.js';
import { elsewhereText, lookElsewhere, quoted } from '../where.js';
import { entryQueueLabel } from '../../../dead-set/entry-queue.js';

/** Dead-set entry ids are UUIDs (`randomUUID`). */
const ENTRY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** `dead list|retry|delete`. */
export async function deadCommand(context: CliContext, args: readonly string[]): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'list':
      noMoreThan(rest, 0, 'dead list takes no arguments (--limit, --offset)');
      return list(context);
    case 'retry':
      return retry(context, entryId(rest, 'retry'));
    case 'delete':
      return remove(context, entryId(rest, 'delete'));
    default:
      throw new CliError(
        sub === undefined ? 'Missing subcommand: dead list|retry|delete' : `Unknown subcommand "dead ${sub}"`,
        EXIT.failed,
        true,
      );
  }
}

/**
 * The dead set on the CLI's connection. The CLI does not know the application's `deadSet` option: no bound of size or
 * age, so that it lists every entry the application keeps, and putting back an entry whose retry failed never drops
 * other entries nor shortens the dead set's expiry.
 */
async function deadSetOf(
  context: CliContext,
  requeue: ConstructorParameters<typeof DeadSetService>[4] = () =>
    Promise.reject(new CliError('retry is not available here')),
): Promise<DeadSetService> {
  const client = await context.redis();
  return new DeadSetService(
    client,
    new RedisScripts(client),
    new UniqueJobsKeys(context.prefix),
    { maxSize: Number.MAX_SAFE_INTEGER, maxAge: undefined },
    requeue,
    // On standard error: standard output carries the command's answer (JSON with --json).
    { warn: (message) => context.io.err(`warning: ${clean(message)}`) },
  );
}

function entryId(args: readonly string[], sub: string): string {
  const id = required(args, 0, 'dead-set entry id');
  noMoreThan(args, 1, `dead ${sub} takes one entry id a call`);
  const normalized = id.trim().toLowerCase();
  if (!ENTRY_ID.test(normalized)) {
    throw new CliError(`Invalid dead-set entry id ${JSON.stringify(truncate(id, 80))}: entry ids are UUIDs`);
  }
  return normalized;
}

async function list(context: CliContext): Promise<number> {
  const { values } = context.args;
  const limit = integerOption('limit', values.limit, 50, 1, 1000);
  const offset = integerOption('offset', values.offset, 0, 0, 1_000_000);
  const deadSet = await deadSetOf(context);
  const [size, entries] = await Promise.all([deadSet.size(), deadSet.list({ offset, limit })]);
  const searched = deadSetSearched(context);
  const elsewhere = size === 0 ? await lookElsewhere(context, ['deadSet']) : undefined;
  context.print({ size, offset, entries, searched, ...(elsewhere ? { elsewhere } : {}) }, () => {
    if (elsewhere) {
      return [
        `The dead set under prefix ${quoted(context.prefix)} (${clean(searched.keys[0])}) is empty, on ${context.redisLabel}.`,
        ...elsewhereText(elsewhere),
      ].join('\n');
    }
    if (entries.length === 0) {
      return `No entries from offset ${offset} in the dead set under prefix ${quoted(context.prefix)} (${size} in all).`;
    }
    const rows = entries.map((entry) => [
      clean(entry.id),
      iso(entry.rejectedAt),
      clean(entryQueueLabel(entry)),
      clean(truncate(entry.jobName, 30)),
      clean(entry.side),
      clean(entry.existingJobId === undefined ? undefined : truncate(entry.existingJobId, 30)),
      clean(truncate(entry.reason, 60)),
    ]);
    return [
      table(['ID', 'REJECTED', 'QUEUE', 'JOB', 'SIDE', 'HOLDER', 'REASON'], rows),
      '',
      `${entries.length} of ${size} entr${size === 1 ? 'y' : 'ies'} (offset ${offset}).`,
    ].join('\n');
  });
  return EXIT.ok;
}

async function remove(context: CliContext, id: string): Promise<number> {
  const deadSet = await deadSetOf(context);
  const entry = await deadSet.get(id);
  if (!entry) throw await noEntry(context, id);
  if (!context.args.values.yes) {
    context.print({ id, dryRun: true, deleted: false, entry }, () =>
      [describeEntry(entry), 'Nothing was deleted: run again with --yes to delete this entry.'].join('\n'),
    );
    return EXIT.ok;
  }
  const deleted = await deadSet.delete(id);
  if (!deleted) throw await noEntry(context, id, 'deleted meanwhile');
  context.print({ id, dryRun: false, deleted: true }, () => `Deleted dead-set entry ${id}.`);
  return EXIT.ok;
}

async function retry(context: CliContext, id: string): Promise<number> {
  const entry = await (await deadSetOf(context)).get(id);
  if (!entry) throw await noEntry(context, id);
  if (entry.truncated) {
    throw new CliError(new TruncatedDeadSetEntryError(id, entry.originalBytes, entry.payloadSha256).message);
  }
  // Loaded on demand: it brings BullMQ and the library's interceptor, which the other commands do not need.
  const { deadSetRequeue } = await import('../dead-set-requeue.js');
  const requeue = await deadSetRequeue(context, entry);
  const deadSet = await deadSetOf(context, requeue.requeue);
  const outcome = await requeue.run(() => deadSet.retry(id));
  if (outcome.status === 'gone') throw await noEntry(context, id, 'taken meanwhile');
  if (outcome.status === 'duplicate') {
    context.print(
      { id, status: 'duplicate', existingJobId: outcome.existingJobId, kept: true },
      () =>
        `Not retried: the lock of ${entry.digest} is still held${outcome.existingJobId === undefined ? '' : ` by job ${clean(outcome.existingJobId)}`}; the entry stays in the dead set.`,
    );
    return EXIT.failed;
  }
  context.print(
    { id, status: 'enqueued', queue: entry.queue, jobId: outcome.jobId, digest: entry.digest },
    () => `Retried dead-set entry ${id}: enqueued job ${clean(outcome.jobId)} on queue ${clean(entry.queue)}.`,
  );
  return EXIT.ok;
}

/** Where the dead-set commands look: the dead set's keys under the prefix. */
function deadSetSearched(context: CliContext) {
  const keys = new UniqueJobsKeys(context.prefix);
  return { redis: context.redisLabel, prefix: context.prefix, keys: [keys.deadSetIndex, keys.deadSetEntries] };
}

/**
 * The error of an entry that is not in the dead set: where it was looked for, and the dead sets under other prefixes
 * (one that holds this very entry first).
 */
async function noEntry(context: CliContext, id: string, why?: string): Promise<CliError> {
  const searched = deadSetSearched(context);
  const elsewhere = await lookElsewhere(context, ['deadSet'], {
    underPrefix: (prefix) => [new UniqueJobsKeys(prefix).deadSetEntries],
    field: id,
  });
  return new CliError(
    [
      `No dead-set entry ${id}${why ? ` (${why})` : ''} in the dead set under prefix ${quoted(context.prefix)} (${clean(searched.keys[1])}), on ${context.redisLabel}.`,
      ...elsewhereText(elsewhere),
    ].join('\n'),
    EXIT.failed,
    false,
    { searched, elsewhere },
  );
}

function describeEntry(entry: DeadSetEntry): string {
  return [
    `Entry ${clean(entry.id)}`,
    `  queue     ${clean(entryQueueLabel(entry))}`,
    `  job name  ${clean(entry.jobName)}`,
    `  digest    ${clean(entry.digest)}`,
    `  holder    ${clean(entry.existingJobId)}`,
    `  rejected  ${iso(entry.rejectedAt)} (${clean(entry.side)} side)`,
    `  reason    ${clean(entry.reason)}`,
    entry.truncated
      ? `  data      (not stored: ${entry.originalBytes ?? '?'} bytes, over deadSet.maxEntryBytes; sha256 ${clean(entry.payloadSha256)})`
      : `  data      ${clean(truncate(jsonText(entry.data, { maxChars: 201 }).text, 200))}`,
  ].join('\n');
}
