import { latestNamed } from '../producer/guarded-queues.js';
import { bullKeys, DEFAULT_QUEUE_PREFIX } from '../redis/keys.js';

/** A queue the application knows, by name and BullMQ key prefix. */
interface NamedQueue {
  name: string;
  prefix: string;
}

/**
 * A queue's BullMQ key prefix: a queue object's own; for a queue given by name, that of the latest queue of the name
 * the application guards, else of its latest worker's (as a dead-set entry of an older version is retried), else
 * BullMQ's default.
 */
export function queuePrefixOf(
  queue: { name: string; qualifiedName?: string } | string,
  guarded: readonly NamedQueue[],
  workers: readonly NamedQueue[],
): string {
  if (typeof queue !== 'string' && queue.qualifiedName !== undefined) {
    return bullKeys.prefixOf({ name: queue.name, qualifiedName: queue.qualifiedName });
  }
  const name = typeof queue === 'string' ? queue : queue.name;
  return (latestNamed(guarded, name) ?? latestNamed(workers, name))?.prefix ?? DEFAULT_QUEUE_PREFIX;
}
