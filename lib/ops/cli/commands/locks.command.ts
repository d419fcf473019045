import { parseLockDigest } from '../../inspection/digest-format.js';
import type { HeldLock, LockFilter, LockOwner } from '../../inspection/lock-inspection.interface.js';
import { integerOption, kindOption, required } from '../args.js';
import type { CliContext } from '../cli-context.js';
import { CliError, EXIT } from '../errors/cli.error.js';
import { ago, clean, duration, table, truncate } from '../output.js';

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
  const locks: HeldLock[] = [];
  let cursor = values.cursor ?? '0';
  // Each call is bounded; keep paging until the page is full or the scan is done.
  do {
    const page = await inspector.listLocks(filter, { cursor, limit: limit - locks.length });
    locks.push(...page.locks);
    cursor = page.cursor;
  } while (cursor !== '0' && locks.length < limit);
  context.print({ locks, cursor }, () => {
    if (locks.length === 0) return 'No locks held.';
    const now = Date.now();
    const rows = locks.map((lock) => {
      const [first] = lock.owners;
      const more = lock.owners.length > 1 ? ` +${lock.owners.length - 1}` : '';
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
    const lines = [table(['DIGEST', 'KIND', 'STORAGE', 'QUEUE', 'OWNER', 'STATE', 'CREATED', 'TTL'], rows)];
    lines.push('', `${locks.length} lock${locks.length === 1 ? '' : 's'}.`);
    if (cursor !== '0') lines.push(`More: run again with --cursor ${cursor}`);
    return lines.join('\n');
  });
  return EXIT.ok;
}

async function show(context: CliContext, args: readonly string[]): Promise<number> {
  const digest = parseLockDigest(required(args, 0, 'digest: locks show <digest>'));
  const locks = await (await context.inspector()).showLock(digest);
  context.print({ digest, locks }, () => {
    if (locks.length === 0) return `No lock is held for ${digest}.`;
    return [`Digest ${digest}`, ...locks.map((lock) => describeLock(lock))].join('\n\n');
  });
  return EXIT.ok;
}

async function release(context: CliContext, args: readonly string[]): Promise<number> {
  const digest = parseLockDigest(required(args, 0, 'digest: locks release <digest>'));
  const kind = kindOption(context.args.values.kind);
  const inspector = await context.inspector();
  const held = (await inspector.showLock(digest)).filter((lock) => kind === undefined || lock.kind === kind);
  const keys = held.map((lock) => lock.key);
  if (!context.args.values.yes) {
    context.print({ digest, ...(kind ? { kind } : {}), dryRun: true, keys, released: 0 }, () =>
      held.length === 0
        ? `Nothing to release: no ${kind ? `${kind} ` : ''}lock is held for ${digest}.`
        : [
            `Would delete ${held.length} key${held.length === 1 ? '' : 's'}:`,
            ...held.map((lock) => `  ${clean(lock.key)}  (${lock.kind}, held by ${ownersText(lock.owners)})`),
            'Nothing was deleted: run again with --yes to release.',
          ].join('\n'),
    );
    return EXIT.ok;
  }
  const released = await inspector.releaseLock(digest, kind);
  context.print({ digest, ...(kind ? { kind } : {}), dryRun: false, keys, released }, () =>
    released === 0
      ? `Nothing to release: no ${kind ? `${kind} ` : ''}lock is held for ${digest}.`
      : `Released ${released} key${released === 1 ? '' : 's'} of ${digest}:\n${keys.map((key) => `  ${clean(key)}`).join('\n')}`,
  );
  return EXIT.ok;
}

function describeLock(lock: HeldLock): string {
  const now = Date.now();
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
    if (owner.since !== undefined) lines.push(`           created  ${ago(owner.since, now)}`);
    if (owner.leaseExpiresAt !== undefined) {
      const left = owner.leaseExpiresAt - now;
      lines.push(`           lease    ${left > 0 ? `ends in ${duration(left)}` : `ended ${duration(-left)} ago`}`);
    }
    if (owner.dataSummary !== undefined) lines.push(`           data     ${clean(owner.dataSummary)}`);
  }
  return lines.join('\n');
}

function ownersText(owners: readonly LockOwner[]): string {
  return owners.map((owner) => `job ${clean(owner.jobId)} (${clean(owner.jobState)})`).join(', ');
}
