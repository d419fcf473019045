// `npm run bench:memory [-- --jobs N]`: what the library keeps in Redis. (1) Bytes per held lock of each kind, from
// MEMORY USAGE of the keys and from the server's used_memory before and after holding 10,000 locks. (2) After 100,000
// unique jobs (every lock type) have run to completion, which of the library's keys are left: only bounded ones
// (dead set, idempotency records with their TTL) may remain. Writes bench/memory-results.json.
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { IdempotencyKey, UniqueJob, UniqueJobsModule, UniqueJobsReaper } from '../dist/index.js';
import { runtimeLockOwner } from '../dist/redis/runtime-lock-owner.js';
import { ensureRedis } from '../scripts/services.mjs';

const argJobs = process.argv.indexOf('--jobs');
const TOTAL = argJobs > 0 ? Number(process.argv[argJobs + 1]) : 100_000;
const HELD = Math.min(10_000, TOTAL);
const redisService = await ensureRedis();
const url = new URL(redisService.url);
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const redis = new Redis(connection);
const run = `mem${process.pid}`;
const prefix = `${run}-uj`;
const queueName = `${run}-jobs`;
/** The library's connection name: the slow log tells its commands from everyone else's. */
const LIBRARY_CLIENT = `${run}-library`;

const byId = (data) => data.id;
class MemoryProcessor extends WorkerHost {
  async process() {
    return undefined;
  }
}
Processor(queueName, { concurrency: 64, autorun: false })(MemoryProcessor);
for (const options of [
  { jobName: 'until_executed', lock: 'until_executed', lockArgs: byId },
  { jobName: 'limited', lock: 'until_executed', lockArgs: byId, lockLimit: 2 },
  { jobName: 'while_executing', lock: 'while_executing', lockArgs: byId },
  { jobName: 'until_and_while', lock: 'until_and_while_executing', lockArgs: byId },
  { jobName: 'keyed', lock: 'until_executing', lockArgs: byId },
]) {
  UniqueJob(options)(MemoryProcessor);
}
IdempotencyKey({ jobName: 'keyed', key: (job) => job.data.id, ttl: 60_000 })(MemoryProcessor);

class MemoryModule {}
Module({
  imports: [
    BullModule.forRoot({ connection }),
    BullModule.registerQueue({ name: queueName, defaultJobOptions: { removeOnComplete: true, removeOnFail: true } }),
    UniqueJobsModule.forRoot({
      connection: { ...connection, connectionName: LIBRARY_CLIENT },
      prefix,
      logger: false,
      reaper: { interval: false, grace: 0 },
    }),
  ],
  providers: [MemoryProcessor],
})(MemoryModule);

const app = await NestFactory.createApplicationContext(MemoryModule, { logger: ['error'] });
const queue = app.get(getQueueToken(queueName));
const worker = app.get(MemoryProcessor).worker;
const kinds = ['until_executed', 'limited', 'while_executing', 'until_and_while', 'keyed'];

async function scan(pattern) {
  const found = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}
const libraryKeys = async () => [...(await scan(`${prefix}:*`)), ...(await scan(`bull:${queueName}:de:*`))];
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))[1]);
const memoryUsage = async (keys) => {
  let bytes = 0;
  for (const key of keys) bytes += Number(await redis.memory('USAGE', key, 'SAMPLES', '0'));
  return bytes;
};

// (1) Held locks: 10,000 enqueue locks of each path, the worker not running.
const held = {};
for (const [name, pattern] of [
  ['until_executed', `bull:${queueName}:de:*`],
  ['limited', `${prefix}:*:queued`],
]) {
  const before = new Set(await libraryKeys());
  const memBefore = await usedMemory();
  for (let i = 0; i < HELD; i += 1000) {
    await queue.addBulk(Array.from({ length: 1000 }, (_, j) => ({ name, data: { id: `held-${i + j}` } })));
  }
  const memAfter = await usedMemory();
  const keys = (await scan(pattern)).filter((key) => !before.has(key));
  held[name] = {
    locks: keys.length,
    bytesPerLockKey: Math.round((await memoryUsage(keys)) / keys.length),
    // The server-wide delta includes the jobs themselves (hash, wait list entry): the lock's share is the key above.
    serverBytesPerJobAndLock: Math.round((memAfter - memBefore) / HELD),
  };
}
// A run-time lock is held only while its job runs: measure one key with one holder directly, the member its job writes
// (its queue's tag and a BullMQ job id of six digits), the lease with its take's mark.
const runtimeKey = `${prefix}:{v1:${'0'.repeat(64)}}:running`;
await redis.zadd(runtimeKey, Date.now() + 30_000 + 511 / 1024, runtimeLockOwner('123456', queue.qualifiedName));
held.while_executing = { locks: 1, bytesPerLockKey: Number(await redis.memory('USAGE', runtimeKey)) };
await redis.del(runtimeKey);
// Obliterating the queue deletes the jobs and BullMQ's deduplication keys, not the general-path locks: the reaper
// releases those (in runs bounded by its time budget).
await queue.obliterate({ force: true });
const orphaned = (await scan(`${prefix}:*:queued`)).length;
const reaper = app.get(UniqueJobsReaper);
const reaping = { orphanedLocks: orphaned, runs: 0, released: 0, longestRunMs: 0, totalMs: 0 };
// Whether reaping ever blocks the server: Redis's own slow log (commands that ran ≥ 10 ms, server-side) during the runs.
const reapStart = Math.floor(Date.now() / 1000);
for (let complete = false; !complete;) {
  const report = await reaper.run();
  complete = report.complete;
  reaping.runs++;
  reaping.released += report.reaped.enqueueLocks;
  reaping.longestRunMs = Math.max(reaping.longestRunMs, report.durationMs);
  reaping.totalMs += report.durationMs;
}
const slow = (await redis.slowlog('GET', 128)).filter(([, at]) => Number(at) >= reapStart);
const byReaper = slow.filter((entry) => entry[5] === LIBRARY_CLIENT);
// On a loaded machine every command can be slow (Redis waits for a CPU): the other clients' count gives the baseline.
reaping.slowCommands = { reaper: byReaper.length, others: slow.length - byReaper.length };
reaping.slowestReaperCommandMs = Math.max(0, ...byReaper.map((entry) => Number(entry[2]) / 1000));
reaping.left = (await scan(`${prefix}:*:queued`)).length;
console.log(
  `After obliterate: ${orphaned} general-path locks orphaned; the reaper released ${reaping.released} in ${reaping.runs} run(s), longest ${reaping.longestRunMs} ms; ${reaping.left} left; reaper commands ≥ 10 ms server-side: ${reaping.slowCommands.reaper} (other clients': ${reaping.slowCommands.others})`,
);

// (2) TOTAL jobs through every lock type; then what is left.
const events = new QueueEvents(queueName, { connection });
await events.waitUntilReady();
let completed = 0;
const allDone = new Promise((resolve) =>
  worker.on('completed', () => {
    if (++completed === TOTAL) resolve();
  }),
);
void worker.run();
const t0 = performance.now();
for (let i = 0; i < TOTAL; i += 1000) {
  const size = Math.min(1000, TOTAL - i);
  await queue.addBulk(
    Array.from({ length: size }, (_, j) => ({ name: kinds[(i + j) % kinds.length], data: { id: `job-${i + j}` } })),
  );
  process.stdout.write(`\renqueued ${i + size}/${TOTAL}, completed ${completed}`);
}
await allDone;
process.stdout.write(`\rcompleted ${completed}/${TOTAL} in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
const left = await libraryKeys();
const byShape = {};
for (const key of left) {
  const shape = key.startsWith('bull:')
    ? 'deduplication key'
    : key.replace(/\{[^}]*\}/, '{…}').replace(prefix, '<prefix>');
  byShape[shape] = (byShape[shape] ?? 0) + 1;
}
const results = {
  date: new Date().toISOString(),
  redis: (await redis.info('server')).match(/redis_version:(\S+)/)[1],
  heldLocks: held,
  reaping,
  afterJobs: { jobs: TOTAL, keysLeft: left.length, byShape },
};
console.log('\nBytes per held lock (MEMORY USAGE of the lock key):');
console.table(
  Object.entries(held).map(([lock, figures]) => ({
    lock,
    'bytes per lock key': figures.bytesPerLockKey,
    'server bytes per job + lock': figures.serverBytesPerJobAndLock ?? '-',
  })),
);
console.log(`\nLibrary keys left after ${TOTAL} unique jobs completed: ${left.length}`);
console.table(byShape);
writeFileSync(new URL('./memory-results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);

await queue.obliterate({ force: true });
for (const key of await scan(`${prefix}:*`)) await redis.del(key);
await events.close();
await app.close();
await redis.quit();
await redisService.stop();
// Idempotency records (settled, with their TTL), the dead set (bounded) and the reaper's leadership key (with a TTL)
// are the only keys of the library that may remain.
const unbounded = left.filter(
  (key) => !key.endsWith(':idempotency') && !key.includes('{dead}') && !key.includes('{reaper}'),
);
process.exit(unbounded.length === 0 && reaping.left === 0 ? 0 : 1);
