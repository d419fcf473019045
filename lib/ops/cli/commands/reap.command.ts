import { UniqueJobsKeys } from '../../../redis/keys.js';
import { OrphanReaper } from '../../reaper/orphan-reaper.js';
import type { ReapReport } from '../../reaper/reap-report.interface.js';
import type { CliContext } from '../cli-context.js';
import { integerOption } from '../args.js';
import { CliError, EXIT } from '../errors/cli.error.js';
import { clean, duration, table, truncate } from '../output.js';
import { elsewhereText, lookElsewhere, queuesText, quoted } from '../where.js';

/** Time budget of one reaper run from the CLI (the CLI runs until a whole pass is done). */
const RUN_BUDGET_MS = 10_000;
/**
 * Suspects one CLI run confirms after one grace (an application's reaper confirms 1,000 a run): 100,000 orphans left by
 * an `obliterate` cost one grace, not one per 1,000.
 */
const RUN_SUSPECTS = 100_000;
/** The longest `--grace`, in seconds. */
const MAX_GRACE_S = 300;
/** Items kept in the CLI's report, as the reaper does per run. */
const MAX_ITEMS = 1000;

/**
 * `reap [--dry-run] [--queue q]`: one whole pass of the orphan reaper (lib/reaper) over the library's locks and
 * idempotency claims under the prefix, and the deduplication keys of every queue found (or of `--queue` only). A dry run reports what it would release and changes nothing. When an
 * application's reaper is working right now (it holds the leadership), nothing is done and the exit code is 1.
 */
export async function reapCommand(context: CliContext, args: readonly string[]): Promise<number> {
  if (args.length > 0)
    throw new CliError(`reap takes no arguments (got ${JSON.stringify(args[0])})`, EXIT.failed, true);
  const dryRun = context.args.values['dry-run'] ?? false;
  // Seconds between finding an orphan and releasing it if it still is one (default: the reaper's, 15 s). At most 300:
  // the run holds the reaper leadership for its grace and more, and a run killed meanwhile (Ctrl-C) cannot give it
  // back, so the applications' reapers skip their runs until it ends.
  const given = context.args.values.grace;
  const grace = given === undefined ? undefined : integerOption('grace', given, 0, 1, MAX_GRACE_S);
  const client = await context.redis();
  const wanted = context.args.values.queue;
  const queues = (await context.queues()).filter((queue) => wanted === undefined || queue.name === wanted);
  const reaper = new OrphanReaper({
    client,
    prefix: context.prefix,
    queues: () => queues,
    options: { timeBudget: RUN_BUDGET_MS, ...(grace === undefined ? {} : { grace: grace * 1000 }) },
    maxSuspects: RUN_SUSPECTS,
  });
  context.onClose(() => reaper.resign());
  let report: ReapReport | undefined;
  do {
    const run = await reaper.run({ dryRun });
    report = report ? merge(report, run) : run;
  } while (report.leader && !report.complete && !report.interrupted);

  if (!report.leader) {
    const leftMs = await client.pttl(new UniqueJobsKeys(context.prefix).reaperLeader).catch(() => -2);
    const ends =
      leftMs > 0
        ? `; it gives it up as it shuts down, and it lapses within ${Math.ceil(leftMs / 1000)} s if that process died now`
        : '';
    throw new CliError(
      `Another process holds the reaper leadership under prefix ${quoted(context.prefix)}: an application whose reaper is on keeps it while it runs, and its own runs release orphans every reaper.interval${ends}. Nothing was done; --dry-run needs no leadership and shows what is orphaned now`,
    );
  }
  const done = report;
  const names = queues.map((queue) => queue.name);
  const searched = await context.searched({ queues: names });
  const { reaped: counts } = done;
  // Deferred suspects were found here: no need to look elsewhere for what this prefix holds.
  const nothing =
    counts.enqueueLocks +
      counts.deduplicationKeys +
      counts.runtimeLeases +
      counts.idempotencyClaims +
      counts.sqlRecords +
      done.deferred ===
    0;
  const elsewhere = nothing ? await lookElsewhere(context, ['locks', 'idempotency']) : undefined;
  context.print({ ...done, searched, ...(elsewhere ? { elsewhere } : {}) }, () => {
    const { reaped } = done;
    const verb = done.dryRun ? 'Would release' : 'Released';
    const lines = [
      `${done.dryRun ? 'Dry run: nothing was changed. ' : ''}Scanned ${done.scannedKeys} ${done.scannedKeys === 1 ? 'key' : 'keys'} in ${duration(done.durationMs)}${done.failedKeys > 0 ? ` (${done.failedKeys} could not be checked and were left alone)` : ''}.`,
      `${verb}: ${reaped.enqueueLocks} enqueue lock owners, ${reaped.deduplicationKeys} deduplication keys, ${reaped.runtimeLeases} run-time leases, ${reaped.idempotencyClaims} idempotency claims.`,
      ...(done.deferred > 0
        ? [
            done.dryRun
              ? `Not counted as orphans: ${done.deferred} enqueue lock owners whose job is missing, while a large addBulk is in progress (its jobs may be on their way: a real run keeps them back while it lasts).`
              : `Kept for a later run: ${done.deferred} enqueue lock owners whose job is missing, while a large addBulk was taking its locks (its jobs may be on their way).`,
          ]
        : []),
      `Searched: prefix ${quoted(context.prefix)} (locks and idempotency claims in Redis) and the deduplication keys of ${queuesText(context, names)}, on ${context.redisLabel}.`,
      ...(elsewhere ? elsewhereText(elsewhere) : []),
    ];
    if (done.items.length > 0) {
      lines.push(
        '',
        table(
          ['KIND', 'JOB', 'REASON', 'KEY'],
          done.items.map((item) => [
            item.kind,
            clean(item.jobId === undefined ? undefined : truncate(item.jobId, 40)),
            clean(item.reason),
            clean(item.key),
          ]),
        ),
      );
    }
    return lines.join('\n');
  });
  return EXIT.ok;
}

/** Two consecutive runs of one pass as one report. Exported for its tests. */
export function merge(first: ReapReport, next: ReapReport): ReapReport {
  const sum = (key: keyof ReapReport['reaped']) => first.reaped[key] + next.reaped[key];
  return {
    startedAt: first.startedAt,
    durationMs: next.startedAt + next.durationMs - first.startedAt,
    dryRun: first.dryRun,
    leader: next.leader,
    complete: next.complete,
    interrupted: first.interrupted || next.interrupted,
    scannedKeys: first.scannedKeys + next.scannedKeys,
    failedKeys: first.failedKeys + next.failedKeys,
    // A run confirms again what the one before it kept back: the last run's are still kept. A dry run keeps nothing
    // back (each counts what it found while a bulk is announced): the runs' counts add up.
    deferred: first.dryRun ? first.deferred + next.deferred : next.deferred,
    reaped: {
      enqueueLocks: sum('enqueueLocks'),
      deduplicationKeys: sum('deduplicationKeys'),
      runtimeLeases: sum('runtimeLeases'),
      idempotencyClaims: sum('idempotencyClaims'),
      sqlRecords: sum('sqlRecords'),
    },
    items: [...first.items, ...next.items].slice(0, MAX_ITEMS),
  };
}
