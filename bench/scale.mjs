// `npm run bench:scale [-- --sizes=1000,100000] [-- --max=N] [-- --db=N] [-- --compare-inspector=<dist/index.js>]`:
// what holding many locks costs (issue 15).
// For each size N (default 10^3, 10^5 and 10^6 held locks), with N jobs waiting in queues no worker runs:
// - bytes per job, from the server's `INFO memory` used_memory before and after adding N jobs: plain BullMQ, BullMQ
//   native deduplication, the floor BullMQ 6 sets for a unique job (native deduplication with its own job id and a
//   128-bit deduplication id, see below), a unique job on the fast path (lockLimit 1: a BullMQ deduplication key) and
//   on the general path (lockLimit 2: the library's slot set), each with the same data ({ id: 'n123' });
// - the lock inspector's first page (`listLocks({}, { limit: 50 })`, as `unique-jobs locks list` and the admin page
//   call it): time and how many locks it lists, and how many pages until one lists a lock (with --compare-inspector,
//   the LockInspector of another build too, on the same held locks: a before/after of an inspector change);
// - the orphan reaper: a few general-path jobs are removed behind the library's back (a plain BullMQ Queue), then
//   reaper runs (each run is what one `reaper.interval` does) until their locks are released: Redis CPU per run
//   (`INFO cpu`, server-wide), the library connection's commands and SCAN calls per run, runs until released;
// - jobs removed through the guarded queue (`queue.remove(id)`): how many of their general-path slots are free when the
//   call returns (no reaper run), and the library connection's commands per removal;
// - the enqueue ratio: a unique `queue.add` (new digests, through the library) against a plain `queue.add`, interleaved
//   rounds with the N jobs held, the median ratio.
// The run works in a logical database of its own (--db, default 9) under names of its own, so its millions of keys
// never reach the scans of other clients of the shared Redis; it deletes everything it wrote. Writes
// bench/scale-results.json.
import 'reflect-metadata';
import { execSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { LockInspector, lockKey, UniqueJob, UniqueJobsModule, UniqueJobsReaper } from '../dist/index.js';
import { ensureRedis } from '../scripts/services.mjs';
import { deleteMatching, inRoundOrder, measure, median, redisCpuMicros, takeCommands } from './measure.mjs';

const option = (name) => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
const SIZES = (option('sizes')?.split(',').map(Number) ?? [1e3, 1e5, 1e6]).filter(
  (n) => n <= Number(option('max') ?? Infinity),
);
const DB = Number(option('db') ?? 9);
const compared = option('compare-inspector');
const inspectors = {
  current: LockInspector,
  ...(compared ? { compared: (await import(pathToFileURL(resolve(compared)).href)).LockInspector } : {}),
};
const CHUNK = 1000; // jobs per addBulk
const CHUNKS_IN_FLIGHT = 4; // the general path readies a bulk's locks one by one: it gets more bulks in flight
const ORPHANS = 5;
const RATIO_ROUNDS = 7;
const RATIO_OPS = 8000; // ~0.5 s a measurement at 1 in flight: a Redis stall (rehash, a freed batch) is a small part of it
const REAPER_BUDGET_MS = 120_000; // reaper runs stop after this long (then the pass is extrapolated)
const FIRST_LOCK_PAGES = 200; // pages walked at most looking for the first lock

const redisService = await ensureRedis();
const url = new URL(redisService.url);
const connection = { host: url.hostname, port: Number(url.port || 6379), db: DB, maxRetriesPerRequest: null };
const run = `scale${process.pid}`;
const prefix = `${run}-uj`;
const q = (name) => `${run}-${name}`;
/** The library's connection (the reaper's commands) and the inspector's, told apart by name. */
const LIBRARY_CLIENT = `${run}-library`;
const INSPECTOR_CLIENT = `${run}-inspector`;
const redis = new Redis(connection);
const cpuClient = new Redis(connection);
const inspectorClient = new Redis({ ...connection, connectionName: INSPECTOR_CLIENT });
const byId = (data) => data.id;
const sum = (counts) => Object.values(counts).reduce((a, b) => a + b, 0);
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))[1]);
const log = (text) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${text}`);

/** Frees everything the run wrote in its database (queues are obliterated first where they exist). */
async function freeAll() {
  return (await deleteMatching(redis, `bull:${run}-*`)) + (await deleteMatching(redis, `${run}*`));
}
process.once('SIGINT', () => void freeAll().finally(() => process.exit(130)));

/** Adds `n` jobs with `addBulk` in chunks (a few in flight); resolves the ids of the jobs whose index is in `keep`. */
async function fill(n, addBulk, entry, keep = [], inFlight = CHUNKS_IN_FLIGHT) {
  const wanted = new Set(keep);
  const kept = new Map();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) {
        const start = next;
        const size = Math.min(CHUNK, n - start);
        next += size;
        const jobs = await addBulk(Array.from({ length: size }, (_, k) => entry(start + k)));
        for (let k = 0; k < size; k++) if (wanted.has(start + k)) kept.set(start + k, jobs[k].id);
      }
    }),
  );
  return kept;
}

/** Bytes per job from used_memory around the fill, plus one job's hash (MEMORY USAGE, encoding) and its lock key. */
async function fillMeasured(label, n, addBulk, entry, { keep = [], queueName, lockKeyOf, inFlight }) {
  const before = await usedMemory();
  const t0 = performance.now();
  const kept = await fill(n, addBulk, entry, [0, ...keep], inFlight);
  const seconds = (performance.now() - t0) / 1000;
  await sleep(200);
  const after = await usedMemory();
  const jobKey = `bull:${queueName}:${kept.get(0)}`;
  const sample = {
    jobHashBytes: Number(await redis.memory('USAGE', jobKey, 'SAMPLES', '0')),
    jobHashEncoding: await redis.object('ENCODING', jobKey),
    ...(lockKeyOf ? { lockKeyBytes: Number(await redis.memory('USAGE', lockKeyOf(0), 'SAMPLES', '0')) } : {}),
  };
  const bytesPerJob = Math.round((after - before) / n);
  log(`${label}: ${n} jobs in ${seconds.toFixed(1)} s, ${bytesPerJob} B/job (${JSON.stringify(sample)})`);
  return { figures: { bytesPerJob, fillSeconds: Number(seconds.toFixed(1)), ...sample }, kept };
}

/** Each inspector's first page (median of 3 calls), then pages until one lists a lock (bounded). */
async function firstPages() {
  const out = {};
  for (const [label, Inspector] of Object.entries(inspectors)) out[label] = await firstPage(Inspector, label);
  return out;
}

async function firstPage(Inspector, label) {
  const t0 = performance.now();
  const queues = await LockInspector.discoverQueues(inspectorClient);
  const discoveryMs = performance.now() - t0;
  // What the CLI reads instead when the application recorded its queues (the registry under the prefix).
  const r0 = performance.now();
  const registered = await inspectorClient.smembers(`${prefix}:{queues}:known`);
  const registryMs = performance.now() - r0;
  const inspector = new Inspector({ client: inspectorClient, prefix, queues });
  const times = [];
  let first;
  takeCommands(INSPECTOR_CLIENT);
  for (let i = 0; i < 3; i++) {
    const s = performance.now();
    const page = await inspector.listLocks({}, { limit: 50 });
    times.push(performance.now() - s);
    first ??= { page, commands: takeCommands(INSPECTOR_CLIENT) };
  }
  let { cursor, locks } = first.page;
  let pages = 1;
  const s = performance.now();
  while (locks.length === 0 && cursor !== '0' && pages < FIRST_LOCK_PAGES) {
    ({ cursor, locks } = await inspector.listLocks({}, { limit: 50, cursor }));
    pages++;
  }
  const figures = {
    firstPageMs: Math.round(median(times)),
    firstPageLocks: first.page.locks.length,
    firstPageScans: first.commands.scan ?? 0,
    firstPageCommands: sum(first.commands),
    pagesToFirstLock: locks.length > 0 ? pages : `> ${pages}`,
    msToFirstLock: Math.round(median(times) + performance.now() - s),
    queueDiscoveryMs: Math.round(discoveryMs),
    queueRegistryMs: Number(registryMs.toFixed(1)),
    queuesRegistered: registered.length,
  };
  log(`inspector (${label}): ${JSON.stringify(figures)}`);
  return figures;
}

/** Reaper runs until every orphan is released (or the budget ends): per run Redis CPU, commands, SCANs. */
async function reap(app, orphans) {
  const keySpace = await redis.dbsize(); // a pass walks every key of the database, whatever it holds
  const reaper = app.get(UniqueJobsReaper);
  const idle0 = await redisCpuMicros(cpuClient);
  await sleep(1000);
  const othersMsPerSecond = ((await redisCpuMicros(cpuClient)) - idle0) / 1000; // the server's load without us
  takeCommands(LIBRARY_CLIENT);
  const runs = [];
  const t0 = performance.now();
  let left = orphans.length;
  let released = 0;
  do {
    const cpu0 = await redisCpuMicros(cpuClient);
    const report = await reaper.run();
    const redisCpuMs = ((await redisCpuMicros(cpuClient)) - cpu0) / 1000;
    const commands = takeCommands(LIBRARY_CLIENT);
    released += report.reaped.enqueueLocks + report.reaped.deduplicationKeys;
    const scores = await Promise.all(orphans.map(({ key, jobId }) => redis.zscore(key, jobId)));
    left = scores.filter((score) => score !== null).length;
    runs.push({
      durationMs: report.durationMs,
      redisCpuMs: Math.round(redisCpuMs),
      commands: sum(commands),
      scans: commands.scan ?? 0,
      scannedKeys: report.scannedKeys,
      complete: report.complete,
      orphansLeft: left,
    });
  } while ((orphans.length === 0 ? runs.length < 3 : left > 0) && performance.now() - t0 < REAPER_BUDGET_MS);
  const keysPerRun = median(runs.map((r) => r.scannedKeys));
  const completed = runs.findIndex((r) => r.complete);
  const figures = {
    orphans: orphans.length,
    released,
    runs: runs.length,
    runsToReleaseAll: orphans.length === 0 ? undefined : left === 0 ? runs.length : `> ${runs.length}`,
    redisCpuMsPerRun: median(runs.map((r) => r.redisCpuMs)),
    othersRedisCpuMsPerSecond: Math.round(othersMsPerSecond),
    commandsPerRun: median(runs.map((r) => r.commands)),
    scansPerRun: median(runs.map((r) => r.scans)),
    scansInAll: runs.reduce((total, r) => total + r.scans, 0),
    commandsInAll: runs.reduce((total, r) => total + r.commands, 0),
    keysPerRun,
    runsPerPass: completed >= 0 ? completed + 1 : `≈ ${Math.ceil(keySpace / Math.max(1, keysPerRun))}`,
    runDurationMs: median(runs.map((r) => r.durationMs)),
    perRun: runs,
  };
  const { perRun: _, ...shown } = figures;
  log(`reaper: ${JSON.stringify(shown)}`);
  return figures;
}

/**
 * Jobs removed through the guarded queue (`queue.remove(id)`): their general-path slots must be free when the call
 * returns, with no reaper run. Counts the library connection's commands per removal.
 */
async function removeGuarded(queue, jobs) {
  takeCommands(LIBRARY_CLIENT);
  for (const { jobId } of jobs) if ((await queue.remove(jobId)) !== 1) throw new Error(`scale bench: ${jobId} kept`);
  const commands = sum(takeCommands(LIBRARY_CLIENT));
  const held = await Promise.all(jobs.map(({ key, jobId }) => redis.zscore(key, jobId)));
  const figures = {
    removed: jobs.length,
    releasedAtOnce: held.filter((score) => score === null).length,
    libraryCommandsPerRemoval: Number((commands / jobs.length).toFixed(2)),
  };
  log(`guarded removal: ${JSON.stringify(figures)}`);
  return figures;
}

/**
 * Unique `queue.add` (new digests) against plain `queue.add`, interleaved rounds at 1 and 32 in flight. The jobs a
 * batch added are removed after it (with their general-path locks), so every batch runs with the same N held.
 */
let serial = 0;
async function enqueueRatio(uniqueQueue, plainQueue, generalLockKey) {
  const out = {};
  for (const inFlight of [1, 32]) {
    const added = [];
    const addTo = (queue) => async () => {
      const id = `r${++serial}`;
      added.push({ queue, id, jobId: (await queue.add('j', { id })).id });
    };
    const variants = { plain: addTo(plainQueue), unique: addTo(uniqueQueue) };
    const rates = { plain: [], unique: [] };
    for (let round = 0; round < RATIO_ROUNDS; round++) {
      for (const [name, op] of inRoundOrder(variants, round)) {
        rates[name].push((await measure(RATIO_OPS, inFlight, op, cpuClient)).rate);
        const batch = added.splice(0);
        await Promise.all(batch.map(({ queue, jobId }) => queue.remove(jobId)));
        const locks = batch.filter(({ queue }) => queue === uniqueQueue && generalLockKey).map(({ id }) => id);
        for (let i = 0; i < locks.length; i += 1000) await redis.del(...locks.slice(i, i + 1000).map(generalLockKey));
      }
    }
    out[inFlight] = {
      ratio: Number(median(rates.unique.map((rate, i) => rate / rates.plain[i])).toFixed(3)),
      plainRate: Math.round(median(rates.plain)),
      uniqueRate: Math.round(median(rates.unique)),
    };
  }
  log(`enqueue ratio: ${JSON.stringify(out)}`);
  return out;
}

/** A Nest app with one queue whose processor (never run) is a unique job on the given path. */
async function uniqueApp(path) {
  const name = q(path);
  class HeldProcessor extends WorkerHost {
    async process() {
      return undefined;
    }
  }
  Processor(name, { autorun: false })(HeldProcessor);
  UniqueJob({ lock: 'until_executed', lockArgs: byId, ...(path === 'general' ? { lockLimit: 2 } : {}) })(HeldProcessor);
  class ScaleApp {}
  Module({
    imports: [
      BullModule.forRoot({ connection }),
      BullModule.registerQueue({ name }),
      UniqueJobsModule.forRoot({
        connection: { ...connection, connectionName: LIBRARY_CLIENT },
        prefix,
        logger: false,
        reaper: { interval: false, grace: 0 },
      }),
    ],
    providers: [HeldProcessor],
  })(ScaleApp);
  const app = await NestFactory.createApplicationContext(ScaleApp, { logger: ['error'] });
  return { app, queue: app.get(getQueueToken(name)), name };
}

async function obliterate(queue) {
  const t0 = performance.now();
  await queue.obliterate({ force: true, count: 5000 });
  const left = (await deleteMatching(redis, `bull:${queue.name}:*`)) + (await deleteMatching(redis, `${prefix}:*`));
  log(`freed ${queue.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s (${left} keys after obliterate)`);
}

const job = (i) => ({ name: 'j', data: { id: `n${i}` } });
const results = {
  date: new Date().toISOString(),
  commit: execSync('git rev-parse --short HEAD').toString().trim(),
  inspectorChanges: execSync('git log -3 --format="%h %ad %s" --date=iso -- lib/ops/inspection').toString().trim(),
  inspectorUncommitted: execSync('git status --porcelain lib/ops/inspection lib/ops/reaper').toString().trim(),
  redis: (await redis.info('server')).match(/redis_version:(\S+)/)[1],
  db: DB,
  loadAverage: loadavg().map((load) => Number(load.toFixed(1))),
  comparedInspector: compared,
  dbKeysAtStart: await redis.dbsize(),
  sizes: {},
};
const started = performance.now();
try {
  for (const n of SIZES) {
    log(`── ${n} held ──`);
    const size = { memory: {} };
    results.sizes[n] = size;
    const plainQueue = new Queue(q('plain'), { connection });
    let filled = await fillMeasured('plain', n, (jobs) => plainQueue.addBulk(jobs), job, { queueName: q('plain') });
    size.memory.plain = filled.figures;

    const nativeQueue = new Queue(q('native'), { connection });
    const native = (i) => ({ ...job(i), opts: { deduplication: { id: `n${i}` } } });
    filled = await fillMeasured('native deduplication', n, (jobs) => nativeQueue.addBulk(jobs), native, {
      queueName: q('native'),
      lockKeyOf: (i) => `bull:${q('native')}:de:n${i}`,
    });
    size.memory.native = filled.figures;
    await obliterate(nativeQueue);
    await nativeQueue.close();

    // The floor on BullMQ 6 for what a unique job needs, plain BullMQ only: its own job id (a duplicate is told apart
    // by BullMQ answering with another job's id, which a counter id cannot show) of the library's length, and a
    // deduplication id naming a digest at the shortest collision-safe size (128 bits: 22 base64url characters). BullMQ
    // stores both in the job's `opts` JSON, which then passes Redis' hash-max-listpack-value (64 bytes): the job hash
    // leaves the compact encoding whatever the library does.
    const floorQueue = new Queue(q('floor'), { connection });
    const tag = `u${randomBytes(9).toString('base64url')}`;
    const floorId = (i) => `uj:${createHash('sha256').update(`n${i}`).digest().subarray(0, 16).toString('base64url')}`;
    const floor = (i) => ({ ...job(i), opts: { jobId: `${tag}${i.toString(36)}`, deduplication: { id: floorId(i) } } });
    filled = await fillMeasured(
      'floor (native, own job id, 128-bit id)',
      n,
      (jobs) => floorQueue.addBulk(jobs),
      floor,
      {
        queueName: q('floor'),
        lockKeyOf: (i) => `bull:${q('floor')}:de:${floorId(i)}`,
      },
    );
    size.memory.floor = filled.figures;
    await obliterate(floorQueue);
    await floorQueue.close();

    // General path: memory, inspector, enqueue ratio, then orphans and the reaper.
    const general = await uniqueApp('general');
    const generalLock = (id) =>
      lockKey({ queue: general.name, name: 'j', lockArgs: id, picked: true, prefix, lockLimit: 2 });
    const generalKey = (i) => generalLock(`n${i}`);
    const orphanIndexes = Array.from({ length: ORPHANS }, (_, k) => Math.floor(((k + 0.5) * n) / ORPHANS));
    const guardedIndexes = orphanIndexes.map((i) => i + 1);
    filled = await fillMeasured('unique, general path', n, (jobs) => general.queue.addBulk(jobs), job, {
      queueName: general.name,
      lockKeyOf: generalKey,
      keep: [...orphanIndexes, ...guardedIndexes],
      inFlight: 16,
    });
    size.memory.general = filled.figures;
    size.inspectorGeneral = await firstPages();
    size.ratioGeneral = await enqueueRatio(general.queue, plainQueue, generalLock);
    const orphans = orphanIndexes.map((i) => ({ key: generalKey(i), jobId: filled.kept.get(i) }));
    const rawGeneral = new Queue(general.name, { connection }); // plain BullMQ: the library does not see the removal
    for (const { key, jobId } of orphans) {
      if ((await redis.zscore(key, jobId)) === null) throw new Error(`scale bench: ${key} does not hold ${jobId}`);
      await rawGeneral.remove(jobId);
    }
    await rawGeneral.close();
    size.reaperGeneral = await reap(general.app, orphans);
    size.guardedRemoval = await removeGuarded(
      general.queue,
      guardedIndexes.map((i) => ({ key: generalKey(i), jobId: filled.kept.get(i) })),
    );
    await obliterate(general.queue);
    await general.app.close();

    // Fast path: memory, inspector, enqueue ratio, a few reaper runs (nothing to release).
    const fast = await uniqueApp('fast');
    filled = await fillMeasured('unique, fast path', n, (jobs) => fast.queue.addBulk(jobs), job, {
      queueName: fast.name,
      lockKeyOf: (i) => lockKey({ queue: fast.name, name: 'j', lockArgs: `n${i}`, picked: true, prefix }),
    });
    size.memory.fast = filled.figures;
    size.inspectorFast = await firstPages();
    size.ratioFast = await enqueueRatio(fast.queue, plainQueue);
    size.reaperFast = await reap(fast.app, []);
    await obliterate(fast.queue);
    await fast.app.close();
    await obliterate(plainQueue);
    await plainQueue.close();
  }
} finally {
  const left = await freeAll();
  log(`cleanup: ${left} keys left over deleted; ${await redis.dbsize()} keys in db ${DB}`);
}
results.minutes = Number(((performance.now() - started) / 60_000).toFixed(1));

// ── report ──
const ratioTo = (a, b) => (a / b).toFixed(2);
const rows = Object.entries(results.sizes).map(([n, s]) => ({
  'held locks': Number(n),
  'B/job plain': s.memory.plain.bytesPerJob,
  'B/job native dedup': s.memory.native.bytesPerJob,
  'B/job floor': s.memory.floor.bytesPerJob,
  'B/job unique fast': `${s.memory.fast.bytesPerJob} (×${ratioTo(s.memory.fast.bytesPerJob, s.memory.native.bytesPerJob)} native, ×${ratioTo(s.memory.fast.bytesPerJob, s.memory.floor.bytesPerJob)} floor)`,
  'B/job unique general': `${s.memory.general.bytesPerJob} (×${ratioTo(s.memory.general.bytesPerJob, s.memory.native.bytesPerJob)} native, ×${ratioTo(s.memory.general.bytesPerJob, s.memory.floor.bytesPerJob)} floor)`,
  ...Object.fromEntries(
    Object.keys(inspectors).flatMap((label) =>
      ['fast', 'general'].map((path) => {
        const page = s[path === 'fast' ? 'inspectorFast' : 'inspectorGeneral'][label];
        const name = `inspector p1 ${path}${label === 'current' ? '' : ` (${label})`}`;
        return [name, `${page.firstPageMs} ms, ${page.firstPageLocks} locks`];
      }),
    ),
  ),
  'reaper Redis ms/run': `${s.reaperGeneral.redisCpuMsPerRun} (fast ${s.reaperFast.redisCpuMsPerRun})`,
  'SCAN/run': s.reaperGeneral.scansPerRun,
  'runs to release': s.reaperGeneral.runsToReleaseAll,
  'guarded remove: released at once': `${s.guardedRemoval.releasedAtOnce}/${s.guardedRemoval.removed} (${s.guardedRemoval.libraryCommandsPerRemoval} library cmds)`,
  'runs/pass': `${s.reaperGeneral.runsPerPass} (fast ${s.reaperFast.runsPerPass})`,
  'ratio @1': `${s.ratioFast[1].ratio} (general ${s.ratioGeneral[1].ratio})`,
  'ratio @32': `${s.ratioFast[32].ratio} (general ${s.ratioGeneral[32].ratio})`,
}));
console.table(rows);
results.table = [
  `| ${Object.keys(rows[0] ?? {}).join(' | ')} |`,
  `| ${Object.keys(rows[0] ?? {})
    .map(() => '---')
    .join(' | ')} |`,
  ...rows.map((row) => `| ${Object.values(row).join(' | ')} |`),
].join('\n');
console.log(`\n${results.table}\n\n${results.minutes} min`);
writeFileSync(new URL('./scale-results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
console.log('Wrote bench/scale-results.json');
await Promise.all([redis, cpuClient, inspectorClient].map((client) => client.quit()));
await redisService.stop();
process.exit(0);
