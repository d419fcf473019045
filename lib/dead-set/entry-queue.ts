import { bullKeys, DEFAULT_QUEUE_PREFIX } from '../redis/keys.js';
import type { DeadSetEntry } from './dead-set-entry.interface.js';

/**
 * How operators see an entry's queue (admin page, CLI): its name, qualified by its BullMQ prefix when that is not
 * BullMQ's default, so that entries of one queue name under two prefixes are told apart.
 */
export function entryQueueLabel(entry: Pick<DeadSetEntry, 'queue' | 'bullPrefix'>): string {
  const { queue, bullPrefix } = entry;
  return bullPrefix === undefined || bullPrefix === DEFAULT_QUEUE_PREFIX
    ? queue
    : bullKeys.qualifiedName(bullPrefix, queue);
}
