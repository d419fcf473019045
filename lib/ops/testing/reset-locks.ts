import { escapeGlob, scanNodes } from '../../redis/scan.js';
import { bullKeys, KEY_SUFFIX, parseOwnKey } from '../../redis/keys.js';
import { internalsOf, type UniqueJobsTestTarget } from './testing-target.js';

/** What {@link resetLocks} deletes besides the locks. */
export interface ResetLocksOptions {
  /**
   * Also delete the idempotency records of the Redis store (`<prefix>:{…}:idempotency`) and the marks of records parked
   * for step jobs (`<prefix>:{…}:parked`, any store). Default `true`.
   */
  idempotency?: boolean;
  /** Also empty the dead set. Default `true`. */
  deadSet?: boolean;
}

/**
 * Deletes the application's unique-job state from Redis, for a clean slate between tests: every key under its
 * `prefix` (locks, idempotency records, dead set) and the deduplication keys the library set on its queues
 * (`<bull prefix>:<queue>:de:uj:…`). Nothing else: other prefixes, other queues' keys and the jobs themselves are left
 * alone (obliterate your queues if you want them empty). Call it while no job of these queues runs. Resolves the
 * number of keys deleted.
 */
export async function resetLocks(app: UniqueJobsTestTarget, options: ResetLocksOptions = {}): Promise<number> {
  const { client, keys, queues } = internalsOf(app);
  const keep = (key: string) =>
    // Records, and the marks of those parked for step jobs (where their jobs live).
    (options.idempotency === false &&
      ([KEY_SUFFIX.idempotency, KEY_SUFFIX.parked] as string[]).includes(parseOwnKey(key)?.suffix ?? '')) ||
    (options.deadSet === false &&
      [keys.deadSetIndex, keys.deadSetEntries, keys.deadSetBytes, keys.deadSetClaims].includes(key));
  const patterns = [
    `${escapeGlob(keys.prefix)}:*`, // every key of the prefix: the locks, the records, the dead set, the reaper's
    ...queues.map(
      (queue) => `${escapeGlob(bullKeys.deduplicationBase(bullKeys.qualifiedName(queue.prefix, queue.name)))}*`,
    ),
  ];
  let deleted = 0;
  for (const node of scanNodes(client)) {
    for (const pattern of patterns) {
      let cursor = '0';
      do {
        const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        const doomed = found.filter((key) => !keep(key));
        if (doomed.length === 0) continue;
        // One DEL per key: on Redis Cluster the keys of one node may live in different slots.
        const results = (await node.pipeline(doomed.map((key) => ['del', key])).exec()) ?? [];
        for (const [error, count] of results) {
          if (error) throw error;
          deleted += count as number;
        }
      } while (cursor !== '0');
    }
  }
  return deleted;
}
