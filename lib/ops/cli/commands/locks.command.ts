import { parseLockDigest } from '../../inspection/digest-format.js';
import { MAX_OWNERS_PER_LOCK } from '../../inspection/held-lock-reader.js';
import type { SurveyedQueue } from '../../inspection/key-survey.js';
import type { HeldLock, HeldLockKind, LockFilter, LockOwner } from '../../inspection/lock-inspection.interface.js';
import { bullKeys, KEY_SUFFIX, UniqueJobsKeys } from '../../../redis/keys.js';
import { integerOption, kindOption, noMoreThan, required } from '../args.js';
import type { CliContext } from '../cli-context.js';
import { CliError, EXIT } from '../errors/cli.error.js';
import { ago, clean, duration, table, truncate } from '../output.js';
import { elsewhereText, lookElsewhere, queuesText, quoted, type SurveyTarget } from '../where.js';

const STORAGE_LABEL: Record<HeldLock['storage'], string> = {
  deduplication: 'BullMQ deduplication key (fast path)',
  queued: 'general-path enqueue lock',
  expiring: 'until_expired enqueue lock',
  running: 'run-time lock',
};

/** `locks list|show|release`. */
export async function locksCommand(context: CliContext, args: readonly string[]): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'list':
      return list(context, rest);
    case 'show':
      return show(context, rest);
    case 'release':
      return release(context, rest);
    default:
      throw new CliError(
        sub === undefined ? 'Missing subcommand: locks list|show|release' : `Unknown subcommand "locks ${sub}"`,
        EXIT.failed,
        true,
      );
  }
}

async function list(context: CliContext, args: readonly string[]): Promise<number> {
  const { values } = context.args;
  const filter: LockFilter = {};
  noMoreThan(args, 1, 'locks list takes one digest or pattern (quote a pattern, or the shell expands it)');
  const pattern = args[0];
  if (pattern !== undefined) {
    if (/[*?]/.test(pattern)) filter.pattern = pattern;
    else filter.digest = pattern;
  }
  const kind = kindOption(values.kind);
  if (kind) filter.kind = kind;
  if (values.queue !== undefined) filter.queue = values.queue;
  if (values['job-id'] !== undefined) filter.jobId = values['job-id'];
  const limit = integerOption('limit', values.limit, 50, 1, 1000);
  const inspector = await context.inspector();
  // One bounded page (at most 200 SCAN calls, docs/operations.md): over a key space mostly made of other data it may
  // come back short, or empty, with a cursor to continue, rather than walk the whole key space in one run.
  const { locks, cursor } = await inspector.listLocks(filter, { cursor: values.cursor ?? '0', limit });
  const searchedQueues = (await context.queues())
    .map((queue) => queue.name)
    .filter((name) => filter.queue === undefined || name === filter.queue);
  const searched = await context.searched({
    queues: searchedQueues,
    keys: keyShapes(context, '<digest>', kind),
    filter,
  });
  const elsewhere = locks.length === 0 && cursor === '0' ? await lookElsewhere(context, ['locks']) : undefined;
  const now = await context.serverNow();
  context.print({ locks, cursor, searched, ...(elsewhere ? { elsewhere } : {}) }, () => {
    if (elsewhere) {
      return [
        `No locks${filterText(filter)} held ${whereText(context, 'v1:…', kind, searchedQueues)}.`,
        ...elsewhereText(elsewhere),
      ].join('\n');
    }
    const rows = locks.map((lock) => {
      const [first] = lock.owners;
      const others = lock.owners.length - 1 + (lock.moreOwners ?? 0);
      const more = others > 0 ? ` +${others} more` : '';
      return [
        lock.digest,
        lock.kind,
        lock.storage,
        clean(lock.queue),
        `${clean(truncate(first.jobId, 40))}${more}`,
        clean(first.jobState),
        ago(first.since, now),
        lock.ttlMs === undefined ? 'none' : duration(lock.ttlMs),
      ];
    });
    const lines =
      locks.length === 0
        ? [`No locks${filterText(filter)} in this page: it ends where its SCAN budget did (200 SCAN calls).`]
        : [
            table(['DIGEST', 'KIND', 'STORAGE', 'QUEUE', 'OWNER', 'STATE', 'CREATED', 'TTL'], rows),
            '',
            `${locks.length} lock${locks.length === 1 ? '' : 's'}.`,
          ];
    // Where it looked, as a "none found" answer says it: locks under another prefix are not listed.
    lines.push(
      `Searched under prefix ${quoted(context.prefix)}` +
        (kind === 'runtime' ? '' : ` and in the deduplication keys of ${queuesText(context, searchedQueues)}`) +
        `, on ${context.redisLabel}.`,
    );
    if (cursor !== '0') lines.push(`More: run again with --cursor ${cursor}`);
    return lines.join('\n');
  });
  return EXIT.ok;
}

async function show(context: CliContext, args: readonly string[]): Promise<number> {
  const digest = parseLockDigest(required(args, 0, 'digest: locks show <digest>'));
  noMoreThan(args, 1, 'locks show takes one digest a call');
  const locks = await (await context.inspector()).showLock(digest);
  const queues = (await context.queues()).map((queue) => queue.name);
  const searched = await context.searched({ keys: keyNames(context, digest, undefined, queues) });
  const elsewhere = locks.length === 0 ? await lookElsewhere(context, ['locks'], digestTarget(digest)) : undefined;
  const now = await context.serverNow();
  context.print({ digest, locks, searched, ...(elsewhere ? { elsewhere } : {}) }, () => {
    if (elsewhere) {
      return [
        `No lock is held for ${digest} ${whereText(context, short(digest), undefined, queues)}.`,
        ...elsewhereText(elsewhere),
      ].join('\n');
    }
    return [`Digest ${digest}`, ...locks.map((lock) => describeLock(lock, now))].join('\n\n');
  });
  return EXIT.ok;
}

async function release(context: CliContext, args: readonly string[]): Promise<number> {
  const digest = parseLockDigest(required(args, 0, 'digest: locks release <digest>'));
  noMoreThan(args, 1, 'locks release takes one digest a call');
  const kind = kindOption(context.args.values.kind);
  const inspector = await context.inspector();
  const held = (await inspector.showLock(digest)).filter((lock) => kind === undefined || lock.kind === kind);
  const keys = held.map((lock) => lock.key);
  const queues = (await context.queues()).map((queue) => queue.name);
  const searched = await context.searched({ keys: keyNames(context, digest, kind, queues) });
  const elsewhere = held.length === 0 ? await lookElsewhere(context, ['locks'], digestTarget(digest, kind)) : undefined;
  const nothing = () =>
    [
      `Nothing to release: no ${kind ? `${kind} ` : ''}lock is held for ${digest} ${whereText(context, short(digest), kind, queues)}.`,
      ...(elsewhere ? elsewhereText(elsewhere) : []),
    ].join('\n');
  const where = { searched, ...(elsewhere ? { elsewhere } : {}) };
  if (!context.args.values.yes) {
    context.print({ digest, ...(kind ? { kind } : {}), dryRun: true, keys, released: 0, ...where }, () =>
      held.length === 0
        ? nothing()
        : [
            `Would delete ${held.length} key${held.length === 1 ? '' : 's'}:`,
            ...held.map(
              (lock) => `  ${clean(lock.key)}  (${lock.kind}, held by ${ownersText(lock.owners, lock.moreOwners)})`,
            ),
            'Nothing was deleted: run again with --yes to release.',
          ].join('\n'),
    );
    return EXIT.ok;
  }
  const released = await inspector.releaseLock(digest, kind);
  context.print({ digest, ...(kind ? { kind } : {}), dryRun: false, keys, released, ...where }, () =>
    released === 0
      ? nothing()
      : `Released ${released} key${released === 1 ? '' : 's'} of ${digest}:\n${keys.map((key) => `  ${clean(key)}`).join('\n')}`,
  );
  return EXIT.ok;
}

/** The library's own keys of a digest's locks under a prefix (all kinds, or one). */
function ownKeys(prefix: string, digest: string, kind: HeldLockKind | undefined): string[] {
  const keys = new UniqueJobsKeys(prefix);
  return [
    ...(kind === 'runtime' ? [] : [keys.enqueueLock(digest), keys.enqueueLock(digest, 'until_expired')]),
    ...(kind === 'enqueue' ? [] : [keys.runtimeLock(digest)]),
  ];
}

/** The keys a digest's locks may live in, as the inspector looks them up (exact names). */
function keyNames(context: CliContext, digest: string, kind: HeldLockKind | undefined, queues: readonly string[]) {
  return [
    ...ownKeys(context.prefix, digest, kind),
    ...(kind === 'runtime'
      ? []
      : queues.map((queue) => bullKeys.deduplication(bullKeys.qualifiedName(context.bullPrefix, queue), digest))),
  ];
}

/** The shapes of the keys a listing scans, with `digest` standing for the digests. */
function keyShapes(context: CliContext, digest: string, kind: HeldLockKind | undefined): string[] {
  const { queued, expiring, running } = KEY_SUFFIX;
  const suffixes =
    kind === 'runtime' ? running : kind === 'enqueue' ? `${queued}|${expiring}` : `${queued}|${expiring}|${running}`;
  // Shapes for the reader (`<queue>` and the suffix alternatives stand for what varies), not keys to send to Redis.
  const lock = new UniqueJobsKeys(context.prefix).shape(digest, suffixes);
  const queueKeys = bullKeys.deduplicationBase(bullKeys.qualifiedName(context.bullPrefix, '<queue>'));
  return [lock, ...(kind === 'runtime' ? [] : [`${queueKeys}${digest}`])];
}

/**
 * Where the locks were looked for, in words: `under prefix "uniquejobs" (uniquejobs:{v1:…}:queued|expiring|running)
 * nor in the deduplication keys (bull:<queue>:de:uj:v1:…) of queue payments under BullMQ prefix "bull", on redis://…`.
 */
function whereText(context: CliContext, digest: string, kind: HeldLockKind | undefined, queues: readonly string[]) {
  const [own, dedup] = keyShapes(context, digest, kind).map(clean);
  const queuePart =
    kind === 'runtime'
      ? ''
      : queues.length === 0
        ? ` nor in any queue's deduplication keys: ${queuesText(context, queues)}`
        : ` nor in the deduplication keys (${dedup}) of ${queuesText(context, queues)}`;
  return `under prefix ${quoted(context.prefix)} (${own})${queuePart}, on ${context.redisLabel}`;
}

/** ` matching v1:ab*, kind runtime, queue q, held by job 7` (what a listing was narrowed to), or nothing. */
function filterText(filter: LockFilter): string {
  const parts = [
    ...(filter.pattern !== undefined ? [`pattern ${clean(filter.pattern)}`] : []),
    ...(filter.digest !== undefined ? [`digest prefix ${clean(filter.digest)}`] : []),
    ...(filter.kind !== undefined ? [`kind ${filter.kind}`] : []),
    ...(filter.queue !== undefined ? [`queue ${clean(filter.queue)}`] : []),
    ...(filter.jobId !== undefined ? [`held by job ${clean(truncate(filter.jobId, 40))}`] : []),
  ];
  return parts.length === 0 ? '' : ` matching ${parts.join(', ')}`;
}

/** The keys a digest's locks would have under another prefix or in another queue. */
function digestTarget(digest: string, kind?: HeldLockKind): SurveyTarget {
  return {
    underPrefix: (prefix) => ownKeys(prefix, digest, kind),
    ...(kind === 'runtime'
      ? {}
      : {
          inQueue: (queue: SurveyedQueue) => [
            bullKeys.deduplication(bullKeys.qualifiedName(queue.bullPrefix, queue.queue), digest),
          ],
        }),
  };
}

/** `v1:5d55a2f4…`: a digest shortened for a sentence that already named it in full. */
function short(digest: string): string {
  return `${digest.slice(0, 11)}…`;
}

/** A lock in words; `now` on Redis' clock (lease ends are written on it). */
function describeLock(lock: HeldLock, now: number): string {
  const lines = [
    `${lock.kind === 'runtime' ? 'Run-time' : 'Enqueue'} lock, ${STORAGE_LABEL[lock.storage]}`,
    `  key    ${clean(lock.key)}`,
    `  queue  ${clean(lock.queue)}`,
    `  ttl    ${lock.ttlMs === undefined ? 'none (ends with its job)' : duration(lock.ttlMs)}`,
  ];
  for (const owner of lock.owners) {
    lines.push(`  owner  job ${clean(owner.jobId)}  ${clean(owner.jobState)}`);
    if (owner.jobName !== undefined) lines.push(`           name     ${clean(owner.jobName)}`);
    if (owner.queue !== undefined && owner.queue !== lock.queue)
      lines.push(`           queue    ${clean(owner.queue)}`);
    if (owner.queueTag !== undefined) {
      lines.push(`           queue    tag ${clean(owner.queueTag)}, not searched: its job may be alive there`);
    }
    if (owner.since !== undefined) lines.push(`           created  ${ago(owner.since, now)}`);
    if (owner.leaseExpiresAt !== undefined) {
      const left = owner.leaseExpiresAt - now;
      lines.push(`           lease    ${left > 0 ? `ends in ${duration(left)}` : `ended ${duration(-left)} ago`}`);
    }
    if (owner.dataSummary !== undefined) lines.push(`           data     ${clean(owner.dataSummary)}`);
  }
  const more = lock.moreOwners ?? 0;
  if (more > 0) {
    lines.push(
      `  +${more} more owner${more === 1 ? '' : 's'}, not read (a lock shows its first ${MAX_OWNERS_PER_LOCK})`,
    );
  }
  return lines.join('\n');
}

function ownersText(owners: readonly LockOwner[], more = 0): string {
  const listed = owners.map((owner) => `job ${clean(owner.jobId)} (${clean(owner.jobState)})`).join(', ');
  return more > 0 ? `${listed}, +${more} more` : listed;
}
