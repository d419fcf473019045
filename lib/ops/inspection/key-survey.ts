import type { Cluster, Redis } from 'ioredis';
import { KEY_SHAPES } from '../../redis/keys.js';
import { connectedScanNodes } from '../../redis/scan.js';

/** Keys asked of SCAN per call by {@link surveyKeys}. */
export const SURVEY_SCAN_COUNT = 1000;
/** SCAN calls {@link surveyKeys} makes at most by default (over every node together). */
export const DEFAULT_SURVEY_SCANS = 50;
/** Distinct prefixes or queues kept per list (the most used first), so that a survey's answer stays short. */
const MAX_LISTED = 20;

const {
  lock: LOCK_KEY,
  idempotency: IDEMPOTENCY_KEY,
  deadSetIndex: DEAD_SET_KEY,
  deduplication: DEDUPLICATION_KEY,
  meta: META_KEY,
} = KEY_SHAPES;

/** A library prefix and how many of its keys of one kind the survey saw. */
export interface SurveyedPrefix {
  /** The library's key prefix (the module's `prefix` option, the CLI's `--prefix`). */
  prefix: string;
  /** Keys of that kind seen under it. */
  keys: number;
}

/** A BullMQ queue and how many of its keys of one kind the survey saw. */
export interface SurveyedQueue {
  /** BullMQ's key prefix of the queue (the CLI's `--bull-prefix`). */
  bullPrefix: string;
  /** The queue name. */
  queue: string;
  /** Keys of that kind seen in it (its `meta` key counts 1). */
  keys: number;
}

/** What {@link surveyKeys} found: where the library's keys live on this Redis. */
export interface KeySurvey {
  /** Prefixes with lock keys (`<prefix>:{v1:…}:queued|expiring|running`), most keys first. */
  lockPrefixes: SurveyedPrefix[];
  /** BullMQ queues with the library's deduplication keys (fast-path enqueue locks), most keys first. */
  deduplicationQueues: SurveyedQueue[];
  /** Prefixes with idempotency records of the Redis store (`<prefix>:{…}:idempotency`). */
  idempotencyPrefixes: SurveyedPrefix[];
  /** Prefixes with a dead set (`<prefix>:{dead}:index`). */
  deadSetPrefixes: SurveyedPrefix[];
  /** BullMQ queues (their `<bull prefix>:<queue>:meta` key). */
  queues: SurveyedQueue[];
  /** Keys the SCAN calls returned. */
  scannedKeys: number;
  /** SCAN calls made. */
  scanCalls: number;
  /** The budget: SCAN calls allowed. */
  maxScans: number;
  /** Whether the whole key space was scanned (`false`: the budget ran out first, and more may exist). */
  complete: boolean;
  /** Whether a list was cut at its first 20 entries. */
  truncated: boolean;
}

/** Options of {@link surveyKeys}. */
export interface KeySurveyOptions {
  /** SCAN calls allowed, over every node together (default 50, of 1,000 keys each). */
  maxScans?: number;
}

/**
 * Looks, within a fixed budget, for where the library's keys live on a Redis: which prefixes hold locks, idempotency
 * records or a dead set, which BullMQ queues hold the library's deduplication keys, and which queues exist. For
 * operators who found nothing where they looked (a wrong `--prefix` or `--bull-prefix`).
 *
 * Read-only and bounded: at most `maxScans` SCAN calls of 1,000 keys (on a Cluster, over every master together), never
 * a walk of the whole key space; `complete` says whether it got to the end. Key names are classified by their shape
 * only, so a key of another application that happens to have the same shape is counted too.
 */
export async function surveyKeys(client: Redis | Cluster, options: KeySurveyOptions = {}): Promise<KeySurvey> {
  const maxScans = Math.max(1, Math.trunc(options.maxScans ?? DEFAULT_SURVEY_SCANS));
  const tally = () => new Map<string, number>();
  const tallies = { lock: tally(), dedup: tally(), idempotency: tally(), dead: tally(), meta: tally() };
  const count = (map: Map<string, number>, name: string) => map.set(name, (map.get(name) ?? 0) + 1);
  let scannedKeys = 0;
  let scanCalls = 0;
  let complete = true;
  for (const node of await connectedScanNodes(client)) {
    let cursor = '0';
    do {
      if (scanCalls >= maxScans) {
        complete = false;
        break;
      }
      const [next, keys] = await node.scan(cursor, 'COUNT', SURVEY_SCAN_COUNT);
      scanCalls++;
      scannedKeys += keys.length;
      cursor = next;
      for (const key of keys) {
        let match: RegExpExecArray | null;
        if ((match = LOCK_KEY.exec(key))) count(tallies.lock, match[1]);
        else if ((match = DEDUPLICATION_KEY.exec(key))) count(tallies.dedup, JSON.stringify([match[1], match[2]]));
        else if ((match = IDEMPOTENCY_KEY.exec(key))) count(tallies.idempotency, match[1]);
        else if ((match = DEAD_SET_KEY.exec(key))) count(tallies.dead, match[1]);
        else if ((match = META_KEY.exec(key))) count(tallies.meta, JSON.stringify([match[1], match[2]]));
      }
    } while (cursor !== '0');
    if (!complete) break;
  }
  const lists = {
    lockPrefixes: prefixes(tallies.lock),
    deduplicationQueues: queues(tallies.dedup),
    idempotencyPrefixes: prefixes(tallies.idempotency),
    deadSetPrefixes: prefixes(tallies.dead),
    queues: queues(tallies.meta),
  };
  const truncated = Object.values(tallies).some((map) => map.size > MAX_LISTED);
  return { ...lists, scannedKeys, scanCalls, maxScans, complete, truncated };
}

function ranked(map: Map<string, number>): [string, number][] {
  return [...map].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0)).slice(0, MAX_LISTED);
}

function prefixes(map: Map<string, number>): SurveyedPrefix[] {
  return ranked(map).map(([prefix, keys]) => ({ prefix, keys }));
}

function queues(map: Map<string, number>): SurveyedQueue[] {
  return ranked(map).map(([pair, keys]) => {
    const [bullPrefix, queue] = JSON.parse(pair) as [string, string];
    return { bullPrefix, queue, keys };
  });
}
