// Where a command looked, and where else the library's keys are: the part of every "nothing found" answer that lets a
// user tell a free lock from a wrong --prefix or --bull-prefix.
import { surveyKeys, type SurveyedPrefix, type SurveyedQueue } from '../inspection/key-survey.js';
import type { CliContext } from './cli-context.js';
import { UniqueJobsKeys } from '../../redis/keys.js';
import { clean } from './output.js';
import { rerunCommand } from './rerun-command.js';

/** Which of the library's keys a command was about. */
export type SurveyTopic = 'locks' | 'idempotency' | 'deadSet';

/** The thing a command did not find, as it would be stored under another prefix or in another queue. */
export interface SurveyTarget {
  /** Its keys under another library prefix. */
  underPrefix?(prefix: string): string[];
  /** Its key in another queue (deduplication keys; an idempotency record of a queue's default scope). */
  inQueue?(queue: SurveyedQueue): string[];
  /** A field of those keys (hashes) instead of the keys themselves. */
  field?: string;
}

/** One place where the thing not found here is. */
export interface ElsewhereMatch {
  /** The key that holds it. */
  key: string;
  /** The options to run the command again with, to find it (`--prefix myapp`, `--bull-prefix {bull}`), if any. */
  rerunWith?: string;
  /** The command to run again with them (`--redis`'s password masked as `***`), when there are such options. */
  command?: string;
  /** Why no option finds it, when none does. */
  note?: string;
}

/** What the bounded survey found besides what the command searched. */
export interface Elsewhere {
  /** Where the very thing not found is held, under another prefix or in another queue. */
  matches: ElsewhereMatch[];
  /** Other library prefixes holding lock keys (locks topic). */
  lockPrefixes?: SurveyedPrefix[];
  /** Queues not searched that hold the library's deduplication keys (locks topic). */
  deduplicationQueues?: SurveyedQueue[];
  /** Queues under other BullMQ prefixes (locks topic, a target in a queue, or when a queue was not found). */
  queues?: SurveyedQueue[];
  /** Other library prefixes holding idempotency records (idempotency topic). */
  idempotencyPrefixes?: SurveyedPrefix[];
  /** Other library prefixes holding a dead set, with its number of entries (deadSet topic). */
  deadSetPrefixes?: (SurveyedPrefix & { entries: number })[];
  /** Keys the survey's SCAN calls returned. */
  scannedKeys: number;
  /** SCAN calls made. */
  scanCalls: number;
  /** SCAN calls allowed (`--max-scans`). */
  maxScans: number;
  /** Whether the whole key space was scanned. */
  complete: boolean;
}

/**
 * Runs the bounded survey (`--max-scans` SCAN calls) and keeps what is relevant to `topics` and not already searched
 * (the command's own prefix and queues), then checks whether `target` is held under one of the prefixes or queues found.
 */
export async function lookElsewhere(
  context: CliContext,
  topics: readonly SurveyTopic[],
  target: SurveyTarget = {},
): Promise<Elsewhere> {
  const survey = await surveyKeys(await context.redis(), { maxScans: context.maxScans });
  const searched = new Set((await context.discoveredQueues()).map((queue) => queue.name));
  const otherPrefix = (found: SurveyedPrefix[]) => found.filter((entry) => entry.prefix !== context.prefix);
  const otherQueue = (found: SurveyedQueue[]) =>
    found.filter((entry) => entry.bullPrefix !== context.bullPrefix || !searched.has(entry.queue));
  const elsewhere: Elsewhere = {
    matches: [],
    scannedKeys: survey.scannedKeys,
    scanCalls: survey.scanCalls,
    maxScans: survey.maxScans,
    complete: survey.complete,
  };
  if (topics.includes('locks')) {
    elsewhere.lockPrefixes = otherPrefix(survey.lockPrefixes);
    elsewhere.deduplicationQueues = otherQueue(survey.deduplicationQueues);
    elsewhere.queues = survey.queues.filter((entry) => entry.bullPrefix !== context.bullPrefix);
  }
  if (topics.includes('idempotency')) elsewhere.idempotencyPrefixes = otherPrefix(survey.idempotencyPrefixes);
  // A target in a queue (`keys show --queue`): the queues under other BullMQ prefixes are where it may be.
  if (target.inQueue && !elsewhere.queues) {
    elsewhere.queues = survey.queues.filter((entry) => entry.bullPrefix !== context.bullPrefix);
  }
  if (topics.includes('deadSet')) {
    const client = await context.redis();
    elsewhere.deadSetPrefixes = await Promise.all(
      otherPrefix(survey.deadSetPrefixes).map(async (entry) => ({
        ...entry,
        entries: await client.zcard(new UniqueJobsKeys(entry.prefix).deadSetIndex),
      })),
    );
  }
  elsewhere.matches = await findTarget(context, elsewhere, target);
  return elsewhere;
}

async function findTarget(context: CliContext, elsewhere: Elsewhere, target: SurveyTarget): Promise<ElsewhereMatch[]> {
  const candidates: ElsewhereMatch[] = [];
  if (target.underPrefix) {
    const prefixes = new Set(
      [elsewhere.lockPrefixes, elsewhere.idempotencyPrefixes, elsewhere.deadSetPrefixes]
        .flatMap((list) => list ?? [])
        .map((entry) => entry.prefix),
    );
    for (const prefix of prefixes) {
      const rerun = withCommand(`--prefix ${prefix}`, rerunCommand(context.args, 'prefix', prefix));
      for (const key of target.underPrefix(prefix)) candidates.push({ key, ...rerun });
    }
  }
  if (target.inQueue) {
    const seen = new Set<string>();
    for (const queue of [...(elsewhere.deduplicationQueues ?? []), ...(elsewhere.queues ?? [])]) {
      const id = JSON.stringify([queue.bullPrefix, queue.queue]);
      if (seen.has(id)) continue;
      seen.add(id);
      const how =
        queue.bullPrefix === context.bullPrefix
          ? { note: `its queue has no ${queue.bullPrefix}:${queue.queue}:meta key, so the CLI does not list it` }
          : withCommand(
              `--bull-prefix ${queue.bullPrefix}`,
              rerunCommand(context.args, 'bull-prefix', queue.bullPrefix),
            );
      for (const key of target.inQueue(queue)) candidates.push({ key, ...how });
    }
  }
  const client = await context.redis();
  // One command per key: on a Cluster the keys live in different slots. At most ~100 (20 prefixes, 40 queues).
  const held = await Promise.all(
    candidates.map(({ key }) => (target.field === undefined ? client.exists(key) : client.hexists(key, target.field))),
  );
  return candidates.filter((_, index) => held[index] === 1);
}

/** The options to run again with, and the command when the CLI would take it. */
function withCommand(rerunWith: string, command: string | undefined): Pick<ElsewhereMatch, 'rerunWith' | 'command'> {
  return command === undefined ? { rerunWith } : { rerunWith, command };
}

/** `"uniquejobs"` — a prefix or name quoted for a message, made safe for a terminal. */
export function quoted(text: string): string {
  return `"${clean(text)}"`;
}

/** `a, b, c`: at most the first `max` items, then `and N more` (a Redis with thousands of queues gives a short line). */
export function listText(items: readonly string[], max = 10): string {
  return items.length > max ? `${items.slice(0, max).join(', ')} and ${items.length - max} more` : items.join(', ');
}

/** `queues a, b under BullMQ prefix "bull"`, or that there is none there. */
export function queuesText(context: CliContext, queues: readonly string[]): string {
  if (queues.length === 0) {
    return `no queue under BullMQ prefix ${quoted(context.bullPrefix)} (no ${clean(context.bullPrefix)}:<queue>:meta key)`;
  }
  const names = listText(queues.map(clean));
  return `${queues.length === 1 ? 'queue' : 'queues'} ${names} under BullMQ prefix ${quoted(context.bullPrefix)}`;
}

/** The human lines of {@link Elsewhere}: matches first, then the other prefixes and queues, then how far it looked. */
export function elsewhereText(elsewhere: Elsewhere): string[] {
  const lines = elsewhere.matches.flatMap((match) => [
    `Found elsewhere: ${clean(match.key)} (${match.rerunWith ? `run again with ${clean(match.rerunWith)}` : clean(match.note)}).`,
    ...(match.command ? [`  ${clean(match.command)}`] : []),
  ]);
  const parts: string[] = [];
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const prefixList = (list: SurveyedPrefix[]) =>
    list.map((entry) => `${quoted(entry.prefix)} (${plural(entry.keys, 'key')})`).join(', ');
  const queueList = (list: SurveyedQueue[]) =>
    list
      .map(
        (entry) =>
          `${clean(entry.queue)} under BullMQ prefix ${quoted(entry.bullPrefix)} (${plural(entry.keys, 'key')})`,
      )
      .join(', ');
  const kinds: string[] = [];
  if (elsewhere.lockPrefixes) {
    kinds.push('locks');
    if (elsewhere.lockPrefixes.length > 0) parts.push(`prefixes holding locks: ${prefixList(elsewhere.lockPrefixes)}`);
  }
  if (elsewhere.deduplicationQueues && elsewhere.deduplicationQueues.length > 0) {
    parts.push(`queues holding deduplication locks: ${queueList(elsewhere.deduplicationQueues)}`);
  }
  if (elsewhere.idempotencyPrefixes) {
    kinds.push('idempotency records');
    if (elsewhere.idempotencyPrefixes.length > 0) {
      parts.push(`prefixes holding idempotency records: ${prefixList(elsewhere.idempotencyPrefixes)}`);
    }
  }
  if (elsewhere.deadSetPrefixes) {
    kinds.push('a dead set');
    if (elsewhere.deadSetPrefixes.length > 0) {
      const sets = elsewhere.deadSetPrefixes.map(
        (entry) => `${quoted(entry.prefix)} (${entry.entries} ${entry.entries === 1 ? 'entry' : 'entries'})`,
      );
      parts.push(`prefixes holding a dead set: ${sets.join(', ')}`);
    }
  }
  if (elsewhere.queues && elsewhere.queues.length > 0) {
    const byPrefix = new Map<string, string[]>();
    for (const { bullPrefix, queue } of elsewhere.queues) {
      byPrefix.set(bullPrefix, [...(byPrefix.get(bullPrefix) ?? []), clean(queue)]);
    }
    const groups = [...byPrefix].map(([bullPrefix, names]) => `${quoted(bullPrefix)} (${names.join(', ')})`);
    parts.push(`queues under other BullMQ prefixes: ${groups.join(', ')}`);
  }
  const extent = elsewhere.complete
    ? `all ${elsewhere.scannedKeys} keys scanned`
    : `in the first ${elsewhere.scannedKeys} keys scanned: the scan stopped after ${elsewhere.scanCalls} SCAN calls, raise --max-scans to look further`;
  if (parts.length > 0) {
    lines.push(`Elsewhere on this Redis (${extent}):`, ...parts.map((part) => `  ${part}`));
  } else {
    const what = kinds.length > 0 ? kinds.join(' or ') : 'keys of the library';
    lines.push(
      elsewhere.complete
        ? `No other prefix holds ${what} (all ${elsewhere.scannedKeys} keys scanned).`
        : `No other prefix holding ${what}: none found in the first ${elsewhere.scannedKeys} keys scanned (the scan stopped after ${elsewhere.scanCalls} SCAN calls; raise --max-scans to look further).`,
    );
  }
  return lines;
}
