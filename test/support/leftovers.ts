import type { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { killFixtures, type Fixture } from './fixtures.js';
import { deleteKeys, scanKeys } from './redis.js';

/**
 * What a multi-process test creates and must remove afterwards: worker processes, queues and their event streams,
 * Redis key namespaces and PostgreSQL tables. `cleanUp()` (in afterEach) kills the processes first, then removes the rest.
 */
export class Leftovers {
  readonly fixtures: Fixture[] = [];
  readonly queues: Queue[] = [];
  readonly queueEvents: QueueEvents[] = [];
  readonly namespaces: string[] = [];
  readonly tables: string[] = [];

  constructor(
    private readonly redis: Redis,
    private readonly pool: pg.Pool,
  ) {}

  async cleanUp(): Promise<void> {
    killFixtures();
    await Promise.all(this.fixtures.splice(0).map((fixture) => fixture.exited));
    for (const events of this.queueEvents.splice(0)) await events.close();
    for (const queue of this.queues.splice(0)) {
      await queue.obliterate({ force: true });
      await queue.close();
    }
    for (const namespace of this.namespaces.splice(0)) {
      await deleteKeys(this.redis, await scanKeys(this.redis, `${namespace}:*`));
    }
    for (const table of this.tables.splice(0)) await this.pool.query(`DROP TABLE IF EXISTS ${table}`);
  }
}
