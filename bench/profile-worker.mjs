// `npm run bench:profile-worker -- <variant> [concurrency] [jobs]`: where a worker's time goes, per job, in one process.
// Drains `jobs` no-op jobs (default 10,000, after 3,000 not counted) with one variant and prints jobs/s and the
// process's CPU per job; unless PROFILE=0, it also records a CPU profile of the counted jobs (V8's inspector, sampled
// every 50 µs, which slows the run) to bench/profile-<variant>-<concurrency>.cpuprofile and prints its self time per job
// by where the code lives (the library, BullMQ, ioredis, native calls such as socket writes, idle), the heaviest
// functions, and which callers the socket writes (`writeUtf8String`, `writeBuffer`) are made for.
// Variants: plain (a plain BullMQ worker), floor (the handler awaits one SET NX and sends a DEL it does not await: the
// bench's two-command floor), while_executing, idempotency (`@IdempotencyKey` on the Redis store).
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { IdempotencyKey, UniqueJob, UniqueJobsModule } from '../dist/index.js';
import { ensureRedis } from '../scripts/services.mjs';

const VARIANTS = ['plain', 'floor', 'while_executing', 'idempotency'];
const [variant, concurrencyArg = '1', jobsArg = '10000'] = process.argv.slice(2);
if (!VARIANTS.includes(variant)) {
  console.error(`usage: profile-worker.mjs <${VARIANTS.join('|')}> [concurrency] [jobs]`);
  process.exit(1);
}
const concurrency = Number(concurrencyArg);
const jobs = Number(jobsArg);
const WARM_UP = 3000;
const profiling = process.env.PROFILE !== '0';

const redis = await ensureRedis();
const url = new URL(redis.url);
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const run = `profile${process.pid}`;
const queueName = `${run}-q`;
const floorClient = new Redis(connection);

class Bench extends WorkerHost {
  async process(job) {
    if (variant === 'floor') {
      const key = `${queueName}:floor:${job.id}`;
      await floorClient.set(key, '1', 'PX', 60000, 'NX');
      void floorClient.del(key);
    }
    return undefined;
  }
}
Processor(queueName, { autorun: false })(Bench);
if (variant === 'while_executing') UniqueJob({ lock: 'while_executing', lockArgs: (data) => data.id })(Bench);
if (variant === 'idempotency') IdempotencyKey({ key: (job) => job.data.id })(Bench);
class App {}
Module({
  imports: [
    BullModule.forRoot({ connection, prefix: run }),
    BullModule.registerQueue({ name: queueName }),
    UniqueJobsModule.forRoot({ logger: false, prefix: run, reaper: { interval: false } }),
  ],
  providers: [Bench],
})(App);
const app = await NestFactory.createApplicationContext(App, { logger: false });
const queue = app.get(getQueueToken(queueName));
const worker = app.get(Bench).worker;
worker.concurrency = concurrency;
const total = WARM_UP + jobs;
for (let i = 0; i < total; i += 500) {
  const size = Math.min(500, total - i);
  await queue.addBulk(Array.from({ length: size }, (_, k) => ({ name: 'w', data: { id: `j${i + k}` } })));
}

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 50 });
let done = 0;
let cpuFrom;
let timeFrom;
const finished = new Promise((resolve, reject) => {
  worker.on('failed', (job, error) => reject(error));
  worker.on('completed', () => {
    if (++done === WARM_UP) {
      if (profiling) void session.post('Profiler.start');
      cpuFrom = process.cpuUsage();
      timeFrom = performance.now();
    }
    if (done === total) resolve();
  });
});
void worker.run();
await finished;
const seconds = (performance.now() - timeFrom) / 1000;
const cpu = process.cpuUsage(cpuFrom);
console.log(
  `${variant} @${concurrency}: ${Math.round(jobs / seconds)} jobs/s, ` +
    `${Math.round((cpu.user + cpu.system) / jobs)} µs of this process's CPU per job${profiling ? ' (profiler on)' : ''}`,
);
if (profiling) {
  const { profile } = await session.post('Profiler.stop');
  const file = new URL(`profile-${variant}-${concurrency}.cpuprofile`, import.meta.url);
  writeFileSync(file, JSON.stringify(profile));
  report(profile, jobs);
  console.log(`profile: ${file.pathname}`);
}
session.disconnect();
await worker.close();
await queue.obliterate({ force: true });
await app.close();
floorClient.disconnect();
// What the library left under its prefix (its queue registry, its reaper's leadership).
const cleaner = new Redis(connection);
for (let cursor = '0'; ;) {
  const [next, keys] = await cleaner.scan(cursor, 'MATCH', `${run}:*`, 'COUNT', 1000);
  if (keys.length > 0) await cleaner.del(...keys);
  if ((cursor = next) === '0') break;
}
cleaner.disconnect();
await redis.stop();

/** Self time per job by where the code lives, the heaviest functions, and who the socket writes are for. */
function report(profile, n) {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const self = new Map();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const place = ({ functionName, url }) =>
    ['(garbage collector)', '(idle)', '(program)'].includes(functionName)
      ? functionName
      : (/node_modules\/(@?[\w-]+)/.exec(url)?.[1] ??
        (url.includes('/dist/') ? 'library' : url.startsWith('node:') ? 'node' : url ? 'other' : 'native'));
  const name = ({ functionName, url, lineNumber }) =>
    `${functionName || '(anonymous)'} ${url.replace(/.*\/(dist|node_modules)\//, '$1/')}:${lineNumber}`;
  const byPlace = new Map();
  const byFunction = new Map();
  const writes = new Map();
  for (const [id, us] of self) {
    const frame = nodes.get(id).callFrame;
    byPlace.set(place(frame), (byPlace.get(place(frame)) ?? 0) + us);
    byFunction.set(name(frame), (byFunction.get(name(frame)) ?? 0) + us);
    if (frame.functionName === 'writeUtf8String' || frame.functionName === 'writeBuffer') {
      // The first caller outside Node's stream code and ioredis: who sent the command written.
      let at = parents.get(id);
      while (at !== undefined && /^(node:|$)|node_modules\/ioredis/.test(nodes.get(at).callFrame.url)) {
        at = parents.get(at);
      }
      const caller = at === undefined ? '(unknown)' : name(nodes.get(at).callFrame);
      writes.set(caller, (writes.get(caller) ?? 0) + us);
    }
  }
  const table = (map, rows) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, rows)
      .map(([what, us]) => `  ${(us / n).toFixed(1).padStart(7)} µs  ${what}`)
      .join('\n');
  console.log(`self time per job, by place:\n${table(byPlace, 12)}`);
  console.log(`heaviest functions:\n${table(byFunction, 25)}`);
  console.log(`socket writes, by the caller that sent the command:\n${table(writes, 8)}`);
}
