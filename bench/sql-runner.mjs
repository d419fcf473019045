// PostgreSQL transactional mode without BullMQ: where a job's time goes between the hand-written transaction, the
// store's claim transaction alone, and the whole runner (`@IdempotencyKey` as a worker runs it), on the same pool and
// tables, interleaved round by round. `npm run bench:sql-runner` (after a build); C=<in flight> N=<jobs a round>
// R=<rounds> to change the defaults (16, 1600, 7).
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PostgresIdempotencyStore, idempotencyOf } from '../dist/index.js';
import { IdempotencyDefinitions } from '../dist/idempotency/idempotency-definitions.js';
import { IdempotencyRunner } from '../dist/idempotency/idempotency.runner.js';
import { UniqueJobsEvents } from '../dist/events/unique-jobs.events.js';
import { ensurePostgres } from '../scripts/services.mjs';
import { handWrittenEffectOnce } from './hand-written-sql.mjs';
import { inRoundOrder, median } from './measure.mjs';

const inFlight = Number(process.env.C ?? 16);
const perRound = Number(process.env.N ?? 1600);
const rounds = Number(process.env.R ?? 7);

const postgres = await ensurePostgres();
const pool = new pg.Pool({ connectionString: postgres.url, max: inFlight + 4 });
const run = `sqlrunner_${Date.now().toString(36)}`;
const store = new PostgresIdempotencyStore({ pool, table: `${run}_idempotency` });
await store.migrate();
await pool.query(`CREATE TABLE "${run}_effects" (key text PRIMARY KEY)`);
await pool.query(`CREATE TABLE "${run}_handmade" (key text PRIMARY KEY)`);
const effectSql = `INSERT INTO "${run}_effects" (key) VALUES ($1)`;

const definitions = new IdempotencyDefinitions(undefined, { default: store, named: new Map() });
const definition = definitions.register('bench', { key: (job) => String(job.data.id), transactional: true }, 'bench');
const runner = new IdempotencyRunner({ events: new UniqueJobsEvents({ logger: false }), logger: console });

let sequence = 0;
/** What the runner reads of a BullMQ job. */
const jobOf = () => {
  const id = String(++sequence);
  return {
    id,
    name: 'w',
    queueName: 'bench',
    queueQualifiedName: 'bull:bench',
    data: { id },
    opts: {},
    stalledCounter: 0,
  };
};

const variants = {
  /** BEGIN, INSERT … ON CONFLICT DO NOTHING on a unique key, the effect, COMMIT (the seed's alternative). */
  'hand-written': () => handWrittenEffectOnce(pool, { keysTable: `${run}_handmade`, effectSql }, `bench:${jobOf().id}`),
  /** The store's claim transaction alone (`claimInTransaction`), the same effect inside it. */
  'store only': async () => {
    const job = jobOf();
    const request = { scope: 'bench:w', key: job.id, owner: randomUUID(), leaseMs: 30_000, ttlMs: 86_400_000 };
    await store.claimInTransaction(
      request,
      (transaction) => transaction.query(effectSql, [`bench:${job.id}`]).then(() => undefined),
      () => ({ result: undefined, ttlMs: request.ttlMs }),
    );
  },
  /** What a worker runs: the runner (key, scope, fingerprint, events, context) around the store. */
  runner: async () => {
    const job = jobOf();
    await runner.run(definition, job, 'token', undefined, async (j) => {
      await idempotencyOf(j).transaction.query(effectSql, [`bench:${j.id}`]);
    });
  },
};

async function measureRound(op) {
  let started = 0;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (started++ < perRound) await op();
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const used = process.cpuUsage(cpu);
  return { rate: perRound / seconds, cpuMicros: (used.user + used.system) / perRound };
}

for (const op of Object.values(variants)) await measureRound(op); // warm-up: prepared statements, JIT
const results = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
for (let round = 0; round < rounds; round++) {
  process.stdout.write(`\rround ${round + 1}/${rounds}   `);
  for (const [name, op] of inRoundOrder(variants, round)) results[name].push(await measureRound(op));
}
process.stdout.write('\r'.padEnd(30) + '\r');
const baseline = results['hand-written'];
console.log(
  `PostgreSQL transactional mode without BullMQ, ${inFlight} in flight, ${rounds} rounds of ${perRound} jobs`,
);
console.table(
  Object.entries(results).map(([name, rows]) => ({
    variant: name,
    'jobs/s': Math.round(median(rows.map((r) => r.rate))),
    'ratio to hand-written (median of rounds)': Number(
      median(rows.map((r, i) => r.rate / baseline[i].rate)).toFixed(3),
    ),
    'node µs/job': Math.round(median(rows.map((r) => r.cpuMicros))),
  })),
);
for (const table of ['idempotency', 'effects', 'handmade']) await pool.query(`DROP TABLE "${run}_${table}"`);
await pool.end();
await postgres.stop();
