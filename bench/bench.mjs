// `npm run bench [-- --quick] [-- --only=enqueue|bulk|worker|wake]`: unique jobs against plain BullMQ, measured side by side in one run. Variants run in
// interleaved rounds so machine drift cancels; each figure is a ratio to plain BullMQ in the same round (the median
// over rounds), plus Redis commands and socket writes per operation counted on the client side (stable across
// machines) and enqueue latency percentiles. Writes bench/results.json.
import 'reflect-metadata';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  defineUniqueJob,
  IdempotencyKey,
  idempotencyOf,
  PostgresIdempotencyStore,
  UniqueJob,
  UniqueJobsModule,
  UniqueJobsService,
} from '../dist/index.js';
import { ensurePostgres, ensureRedis } from '../scripts/services.mjs';
import { cpuMeter, inRoundOrder, measure, median, percentile, postgresCpuReader, sent, summarize } from './measure.mjs';
import { measureWakeUp } from './wake-up.mjs';
import { handWrittenEffectOnce } from './hand-written-sql.mjs';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 3 : 7;
const ENQUEUE_N = quick ? 1500 : 6000;
const WORKER_N = quick ? 1000 : 4000;
// PostgreSQL commits cost a WAL flush each (fsync on): fewer jobs keep those variants' rounds as long as the others
// one at a time. At 16 in flight a round of 600 lasted ~0.1 s, where a worker's fixed cost per round (its start, the
// first fetch, the end) weighed enough to pull every ratio towards 1: 2,400 (docs/performance.md, session 15).
const SQL_WORKER_N = { 1: quick ? 200 : 600, 16: quick ? 800 : 2400 };
const WORKER_CONCURRENCIES = [1, 16];
// The SQL target's ratio is the median over the rounds of a pair of variants whose rounds are short and noisy (one
// round's ratio ranged 0.75-0.97 at 16 in flight in one run): more rounds of that pair alone, after the main ones,
// narrow its median for a small part of the bench's time (docs/performance.md, session 17).
const SQL_EXTRA_ROUNDS = quick ? 0 : 10;
const round3 = (value) => Number(value.toFixed(3));

const redis = await ensureRedis();
const postgres = await ensurePostgres();
// Connections kept open (a worker under load keeps its own): with pg's default idle timeout (10 s) the Redis variants
// between two SQL rounds let the pool close them, and the next SQL round paid for new backends and, for the store,
// for preparing its statements again on each: a cost of the measurement, not of a job. Opened once, before any round.
const pool = new pg.Pool({ connectionString: postgres.url, max: 20, idleTimeoutMillis: 0 });
await Promise.all(Array.from({ length: 20 }, () => pool.connect())).then((clients) => clients.map((c) => c.release()));
// The PostgreSQL server's CPU per job of the SQL variants (its processes on this machine; none when it runs elsewhere).
const postgresCpu = await postgresCpuReader(pool);
// Count the SQL statements the PostgreSQL store sends, per processed job: every query goes through a client.
let statements = 0;
const clientQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (...args) {
  statements++;
  return clientQuery.apply(this, args);
};
const url = new URL(redis.url);
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const run = `bench${process.pid}`;
const q = (name) => `${run}-${name}`;

// CPU per operation, of this process and of the Redis server (`INFO cpu`), in µs: where the time of an operation goes
// (JavaScript and syscalls here, scripts in Redis). Less stable than command counts, steadier than rates.
const cpuClient = new Redis(connection);

// ── enqueue ──
class EnqueueApp {}
const uniqueDefinition = defineUniqueJob({
  queue: q('unique'),
  jobName: 'u',
  lock: 'until_executed',
  lockArgs: (d) => d.id,
});
// The general path (the library's slot set), for addBulk.
const limitedDefinition = defineUniqueJob({
  queue: q('limited'),
  jobName: 'u',
  lock: 'until_executed',
  lockArgs: (d) => d.id,
  lockLimit: 2,
});
Module({
  imports: [
    BullModule.forRoot({ connection }),
    BullModule.registerQueue(
      { name: q('plain') },
      { name: q('native') },
      { name: q('floor') },
      { name: q('unique') },
      { name: q('limited') },
    ),
    UniqueJobsModule.forRoot({ logger: false, prefix: run, jobs: [uniqueDefinition, limitedDefinition] }),
  ],
})(EnqueueApp);
const enqueueApp = await NestFactory.createApplicationContext(EnqueueApp, { logger: false });
const plainQueue = enqueueApp.get(getQueueToken(q('plain')));
const nativeQueue = enqueueApp.get(getQueueToken(q('native')));
const floorQueue = enqueueApp.get(getQueueToken(q('floor')));
const uniqueQueue = enqueueApp.get(getQueueToken(q('unique')));
const limitedQueue = enqueueApp.get(getQueueToken(q('limited')));
const uniqueJobs = enqueueApp.get(UniqueJobsService);
await uniqueJobs.enqueue(uniqueQueue, 'u', { id: 'dup' }); // the holder every duplicate meets

// The README's path is `queue.add` on a queue from `getQueueToken` (guarded by the library); `uniqueJobs.enqueue`
// answers with a result object instead of a Job.
let serial = 0;
// The floor BullMQ 6 sets for a new unique job, plain BullMQ only: native deduplication with a job id of its own (a
// duplicate is told apart because BullMQ answers with another job's id, which a counter id cannot show; 16 characters,
// as the library's) and a deduplication id naming a digest at the shortest collision-safe size (128 bits, base64url).
const floorTag = `f${randomBytes(9).toString('base64url')}`;
const floorDedupId = (i) => `uj:${createHash('sha256').update(`f${i}`).digest().subarray(0, 16).toString('base64url')}`;
const enqueueVariants = {
  'plain queue.add': (i) => plainQueue.add('p', { id: i }),
  'BullMQ native deduplication': () => nativeQueue.add('p', { id: ++serial }, { deduplication: { id: `d${serial}` } }),
  'floor: native deduplication + own job id': () => {
    const i = ++serial;
    return floorQueue.add(
      'p',
      { id: i },
      { jobId: `${floorTag}${i.toString(36)}`, deduplication: { id: floorDedupId(i) } },
    );
  },
  'unique queue.add, new digests': () => uniqueQueue.add('u', { id: `a${++serial}` }),
  'unique queue.add, duplicates': () => uniqueQueue.add('u', { id: 'dup' }),
  'uniqueJobs.enqueue, new digests': () => uniqueJobs.enqueue(uniqueQueue, 'u', { id: `n${++serial}` }),
  'uniqueJobs.enqueue, duplicates (rejected)': () => uniqueJobs.enqueue(uniqueQueue, 'u', { id: 'dup' }),
};

const only = process.argv.find((arg) => arg.startsWith('--only='))?.slice('--only='.length);
// `--variant=<text>[,<text>…]`: only the variants whose name contains one of them (and the baseline), e.g. to profile
// one path against its floor (`--variant=while_executing,floor`).
const picks = process.argv
  .find((arg) => arg.startsWith('--variant='))
  ?.slice('--variant='.length)
  .split(',')
  .filter(Boolean);
const picked = (variants, baseline) => {
  for (const name of Object.keys(variants))
    if (picks && name !== baseline && !picks.some((pick) => name.includes(pick))) delete variants[name];
  return variants;
};
picked(enqueueVariants, 'plain queue.add');
const results = { machine: { quick, rounds: ROUNDS }, enqueue: {}, worker: {} };
for (const inFlight of only === undefined || only === 'enqueue' ? [1, 32] : []) {
  const rounds = Object.fromEntries(Object.keys(enqueueVariants).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    process.stdout.write(`\renqueue, ${inFlight} in flight: round ${round + 1}/${ROUNDS}   `);
    for (const [name, op] of inRoundOrder(enqueueVariants, round)) {
      rounds[name].push(await measure(ENQUEUE_N, inFlight, op, cpuClient));
    }
  }
  results.enqueue[inFlight] = summarize(rounds, 'plain queue.add');
  // The new-digest target is against native deduplication; what BullMQ 6 allows is the floor: both, round by round.
  const newDigests = 'unique queue.add, new digests';
  const floorName = 'floor: native deduplication + own job id';
  if (![newDigests, floorName, 'BullMQ native deduplication'].every((name) => name in rounds)) continue;
  const against = (baseline, name) => summarize(rounds, baseline)[name].ratio;
  results.newDigests ??= {};
  results.newDigests[inFlight] = {
    'unique / native': against('BullMQ native deduplication', newDigests),
    'unique / floor': against(floorName, newDigests),
    'floor / native': against('BullMQ native deduplication', floorName),
  };
}

// ── addBulk: 100 jobs a call, one call at a time, new digests ──
const BULK = 100;
const BULK_N = quick ? 20 : 60;
const bulkOf = (queue, name, tag) =>
  queue.addBulk(Array.from({ length: BULK }, () => ({ name, data: { id: `${tag}${++serial}` } })));
const bulkVariants = picked(
  {
    'plain addBulk': () => bulkOf(plainQueue, 'p', 'b'),
    'unique addBulk, fast path': () => bulkOf(uniqueQueue, 'u', 'b'),
    'unique addBulk, general path (lockLimit 2)': () => bulkOf(limitedQueue, 'u', 'b'),
  },
  'plain addBulk',
);
if (only === undefined || only === 'bulk') {
  const rounds = Object.fromEntries(Object.keys(bulkVariants).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    process.stdout.write(`\raddBulk of ${BULK}: round ${round + 1}/${ROUNDS}   `);
    for (const [name, op] of inRoundOrder(bulkVariants, round)) {
      rounds[name].push(await measure(BULK_N, 1, op, cpuClient));
    }
  }
  results.bulk = summarize(rounds, 'plain addBulk');
}
await enqueueApp.close();

// ── workers ──
// The floor of any design that answers a claim before the handler starts: a plain worker whose handler first waits
// for one small Redis call (a SET NX on another connection), as a lock or idempotency claim must.
const floorClient = new Redis(connection);
// The least a lock that checks its holder can send: one script call, awaited (here a SET NX unless the holder's key is
// gone, written as a script because a bare SET cannot look at another key).
floorClient.defineCommand('floorTake', {
  numberOfKeys: 2,
  lua: "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') and 1 or 0",
});
// The effect of the SQL variants: one row per job, in a table with a unique key.
const effectsTable = `${run}_effects`;
const handmadeTable = `${run}_handmade_keys`;
const effectSql = `INSERT INTO "${effectsTable}" (key) VALUES ($1)`;
const handWrittenTables = { keysTable: handmadeTable, effectSql };
function processorFor(queueName, { unique, idempotency, roundTrip, giveBack, script, effect, handmade }) {
  class BenchProcessor extends WorkerHost {
    async process(job) {
      const floorKey = `${queueName}:floor:${job.id}`;
      if (roundTrip) await floorClient.set(floorKey, '1', 'PX', 60000, 'NX');
      if (script) await floorClient.floorTake(floorKey, `${floorKey}:holder`, '1', 60000);
      if (giveBack) void floorClient.del(floorKey);
      if (effect) await idempotencyOf(job).transaction.query(effectSql, [`${queueName}:${job.data.id}`]);
      if (handmade)
        await handWrittenEffectOnce(pool, handWrittenTables, `${queueName}:${job.data.id}`, handmade === 'keepResult');
      return undefined;
    }
  }
  Processor(queueName, { autorun: false })(BenchProcessor);
  if (unique) UniqueJob(unique)(BenchProcessor);
  if (idempotency) IdempotencyKey(idempotency)(BenchProcessor);
  return BenchProcessor;
}
const sqlStore = new PostgresIdempotencyStore({ pool, table: `${run}_idempotency` });
await sqlStore.migrate();
await pool.query(`CREATE TABLE "${effectsTable}" (key text PRIMARY KEY)`);
await pool.query(`CREATE TABLE "${handmadeTable}" (key text PRIMARY KEY, result jsonb)`);
const key = (job) => job.data.id;
const workerVariants = {
  'plain worker': {},
  'plain worker + 1 round trip (floor)': { roundTrip: true },
  // What a lock or claim must send at least: taken before the handler (awaited) and given back, or settled, after it
  // (not awaited), two commands; or one script call, for a lock that looks at its holder instead of being given back.
  'plain worker + 2 commands (floor of take and give back)': { roundTrip: true, giveBack: true },
  'plain worker + 1 script call (floor of a lock checking its holder)': { script: true },
  // What BullMQ 6 costs for the jobs a unique job must be (its own id, a deduplication id), with no library code.
  'plain worker, jobs with own id + deduplication id (floor of until_executed)': { floorJobs: true },
  until_executed: { unique: { lock: 'until_executed', lockArgs: (d) => d.id } },
  while_executing: { unique: { lock: 'while_executing', lockArgs: (d) => d.id } },
  '@IdempotencyKey, Redis store': { idempotency: { key } },
  '@IdempotencyKey, PostgreSQL store': { idempotency: { key, store: 'sql' } },
  // Both transactional variants write the same effect (one INSERT) in their transaction.
  '@IdempotencyKey, PostgreSQL transactional': {
    idempotency: { key, store: 'sql', transactional: true },
    effect: true,
  },
  'hand-written SQL (BEGIN, INSERT … ON CONFLICT, effect, COMMIT)': { handmade: true },
  'hand-written SQL keeping the result (… effect, UPDATE result, COMMIT)': { handmade: 'keepResult' },
};
picked(workerVariants, 'plain worker');
for (const concurrency of only === undefined || only === 'worker' ? WORKER_CONCURRENCIES : []) {
  const rounds = Object.fromEntries(Object.keys(workerVariants).map((k) => [k, []]));
  // A warm-up round, not counted: the first round of a variant paid for compiling its code and, for the SQL variants,
  // for preparing the store's statements on each pool connection it met first (the transactional / hand-written ratio
  // of that round was ~0.66 where the others were ~0.8 one at a time): a cost of the process's start, not of a job.
  process.stdout.write(`\rworkers, concurrency ${concurrency}: warm-up   `);
  for (const [name, variant] of inRoundOrder(workerVariants, 0)) {
    await measureWorker(`${name}-${concurrency}-warm`.replace(/\W/g, ''), variant, concurrency);
  }
  for (let round = 0; round < ROUNDS; round++) {
    process.stdout.write(`\rworkers, concurrency ${concurrency}: round ${round + 1}/${ROUNDS}   `);
    for (const [name, variant] of inRoundOrder(workerVariants, round)) {
      rounds[name].push(
        await measureWorker(`${name}-${concurrency}-${round}`.replace(/\W/g, ''), variant, concurrency),
      );
    }
  }
  results.worker[concurrency] = summarize(rounds, 'plain worker');
  // The SQL target is against the hand-written version; round by round, as for the enqueue floor.
  const transactional = '@IdempotencyKey, PostgreSQL transactional';
  const handWritten = Object.keys(rounds).filter((name) => name.startsWith('hand-written'));
  if (transactional in rounds && handWritten.length > 0) {
    const pair = Object.fromEntries([transactional, ...handWritten].map((name) => [name, [...rounds[name]]]));
    const pairVariants = Object.fromEntries(Object.keys(pair).map((name) => [name, workerVariants[name]]));
    for (let round = ROUNDS; round < ROUNDS + SQL_EXTRA_ROUNDS; round++) {
      process.stdout.write(
        `\rworkers, concurrency ${concurrency}: SQL round ${round + 1}/${ROUNDS + SQL_EXTRA_ROUNDS}   `,
      );
      for (const [name, variant] of inRoundOrder(pairVariants, round)) {
        pair[name].push(
          await measureWorker(`${name}-${concurrency}-${round}`.replace(/\W/g, ''), variant, concurrency),
        );
      }
    }
    results.sql ??= {};
    results.sql[concurrency] = Object.fromEntries(
      handWritten.map((name) => [`transactional / ${name}`, summarize(pair, name)[transactional].ratio]),
    );
    results.sql[concurrency].rounds = pair[transactional].length;
    // The main rounds alone (every variant in each), so that the pair's own rounds can be told apart from them.
    results.sql[concurrency]['main rounds only'] = summarize(rounds, handWritten[0])[transactional].ratio;
  }
  // The worker targets against their floors, round by round: how far a variant's ratio to plain sits below the
  // one-round-trip floor's in the same round (target: within 0.05), and until_executed / its own floor.
  const roundTrip = 'plain worker + 1 round trip (floor)';
  const twoCommands = 'plain worker + 2 commands (floor of take and give back)';
  const oneScript = 'plain worker + 1 script call (floor of a lock checking its holder)';
  const ownIdFloor = 'plain worker, jobs with own id + deduplication id (floor of until_executed)';
  const ratioOf = (name, i) => rounds[name][i].rate / rounds['plain worker'][i].rate;
  const below = (name, floor = roundTrip) => median(rounds[name].map((_, i) => ratioOf(floor, i) - ratioOf(name, i)));
  const floors = {};
  for (const name of ['while_executing', '@IdempotencyKey, Redis store']) {
    if (name in rounds && roundTrip in rounds) floors[`${name}: below the round-trip floor by`] = round3(below(name));
    if (name in rounds && twoCommands in rounds)
      floors[`${name}: below the two-command floor by`] = round3(below(name, twoCommands));
  }
  for (const name of [twoCommands, oneScript]) {
    if (name in rounds && roundTrip in rounds) floors[`${name}: below the round-trip floor by`] = round3(below(name));
  }
  if ('until_executed' in rounds && ownIdFloor in rounds) {
    floors['until_executed / its floor'] = summarize(rounds, ownIdFloor).until_executed.ratio;
  }
  if (Object.keys(floors).length > 0) (results.floors ??= {})[concurrency] = floors;
}

// ── a duplicate delivery waiting for a key in progress: woken when the holder completes ──
if (only === undefined || only === 'wake') {
  process.stdout.write('\rduplicate wake-up latency   ');
  const { latencies } = await measureWakeUp({
    connection,
    prefix: run,
    queueName: q('wake'),
    samples: quick ? 20 : 100,
  });
  results.wakeUp = {
    samples: latencies.length,
    p50ms: Number(percentile(latencies, 50).toFixed(1)),
    p99ms: Number(percentile(latencies, 99).toFixed(1)),
  };
}

/** Enqueues the variant's jobs (through the library for unique variants), then times a worker draining them. */
async function measureWorker(label, variant, concurrency) {
  const queueName = q(label);
  const usesSql = variant.idempotency?.store === 'sql' || variant.handmade;
  const n = usesSql ? SQL_WORKER_N[concurrency] : WORKER_N;
  const Bench = processorFor(queueName, variant);
  class WorkerApp {}
  Module({
    imports: [
      BullModule.forRoot({ connection }),
      BullModule.registerQueue({ name: queueName }),
      UniqueJobsModule.forRoot({ logger: false, prefix: run, idempotency: { stores: { sql: sqlStore } } }),
    ],
    providers: [Bench],
  })(WorkerApp);
  const app = await NestFactory.createApplicationContext(WorkerApp, { logger: false });
  const queue = app.get(getQueueToken(queueName));
  for (let i = 0; i < n; i += 500) {
    await queue.addBulk(
      Array.from({ length: Math.min(500, n - i) }, (_, k) => ({
        name: 'w',
        data: { id: i + k },
        ...(variant.floorJobs
          ? { opts: { jobId: `${floorTag}w${i + k}`, deduplication: { id: floorDedupId(i + k) } } }
          : {}),
      })),
    );
  }
  const worker = app.get(Bench).worker;
  worker.concurrency = concurrency;
  let done = 0;
  const finished = new Promise((resolve, reject) => {
    worker.on('completed', () => ++done === n && resolve());
    worker.on('failed', (job, error) => reject(new Error(`${label}: job ${job?.id} failed: ${error.message}`)));
  });
  const cpu = await cpuMeter(cpuClient, usesSql ? postgresCpu : undefined);
  const before = sent.total;
  const writesBefore = sent.writes;
  const statementsBefore = statements;
  const t0 = performance.now();
  void worker.run();
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  const commandsPerOp = (sent.total - before) / n;
  const writesPerOp = (sent.writes - writesBefore) / n;
  const sqlPerOp = (statements - statementsBefore) / n;
  const cpuPerOp = await cpu(n);
  await worker.close();
  await queue.obliterate({ force: true });
  await app.close();
  return { rate: n / seconds, commandsPerOp, writesPerOp, sqlPerOp, ...cpuPerOp, latencies: [] };
}

// ── report ──
process.stdout.write('\r'.padEnd(60) + '\r');
const rows = [];
/** A report row: rate, ratio, commands and CPU per operation. */
const row = (measure, name, r) => ({
  measure,
  variant: name,
  'ops/s': r.rate,
  'ratio to plain': r.ratio,
  'cmds/op': r.commandsPerOp,
  'cmds/op − plain': r.extraCommandsPerOp,
  'writes/op': r.writesPerOp,
  'node µs/op': r.nodeUsPerOp,
  'redis µs/op': r.redisUsPerOp,
});
/** A row of an enqueue-side measure, with its latency. */
const enqueueRow = (measure, name, r) => ({ ...row(measure, name, r), 'p50 ms': r.p50ms, 'p99 ms': r.p99ms });
for (const [inFlight, variants] of Object.entries(results.enqueue)) {
  for (const [name, r] of Object.entries(variants)) rows.push(enqueueRow(`enqueue @${inFlight} in flight`, name, r));
}
for (const [name, r] of Object.entries(results.bulk ?? {})) {
  rows.push(enqueueRow(`addBulk of ${BULK} jobs, 1 in flight`, name, r));
}
for (const [concurrency, variants] of Object.entries(results.worker)) {
  for (const [name, r] of Object.entries(variants)) {
    rows.push({
      ...row(`worker @concurrency ${concurrency}`, name, r),
      ...(r.sqlPerOp ? { 'SQL/op': r.sqlPerOp } : {}),
      ...(r.postgresUsPerOp !== undefined ? { 'postgres µs/op': r.postgresUsPerOp } : {}),
    });
  }
}
if (results.wakeUp) {
  rows.push({
    measure: 'duplicate settle after holder completion',
    variant: `@IdempotencyKey, Redis store (${results.wakeUp.samples} samples)`,
    'p50 ms': results.wakeUp.p50ms,
    'p99 ms': results.wakeUp.p99ms,
  });
}
console.table(rows);
if (results.sql) {
  console.log('PostgreSQL transactional mode against the hand-written SQL (median of rounds):');
  console.table(results.sql);
}
if (results.floors) {
  console.log('Worker variants against their floors (median of rounds), by concurrency:');
  const byMeasure = {};
  for (const [concurrency, floors] of Object.entries(results.floors))
    for (const [measure, value] of Object.entries(floors)) (byMeasure[measure] ??= {})[concurrency] = value;
  console.table(byMeasure);
}
if (results.newDigests) {
  console.log(
    'unique queue.add with new digests, against BullMQ native deduplication and the floor (median of rounds):',
  );
  console.table(results.newDigests);
}
writeFileSync(new URL('./results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
console.log('Wrote bench/results.json');

const cleanup = new Redis(connection);
for (const name of ['plain', 'native', 'floor', 'unique', 'limited'])
  await new Queue(q(name), { connection }).obliterate({ force: true }).catch(() => undefined);
let cursor = '0';
do {
  const [nextCursor, keys] = await cleanup.scan(cursor, 'MATCH', `${run}*`, 'COUNT', 1000);
  cursor = nextCursor;
  if (keys.length) await cleanup.del(...keys);
} while (cursor !== '0');
await cleanup.quit();
await floorClient.quit();
await cpuClient.quit();
for (const table of [`${run}_idempotency`, effectsTable, handmadeTable])
  await pool.query(`DROP TABLE IF EXISTS "${table}"`);
await pool.end();
await postgres.stop();
await redis.stop();
process.exit(0);
