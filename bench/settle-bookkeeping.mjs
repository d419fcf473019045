// `node bench/settle-bookkeeping.mjs [root]`: what a settled idempotency key costs the waiting duplicates' bookkeeping
// (holding + settled of one key, the per-job work of every @IdempotencyKey job), with the clock moving 0.21 ms a job
// (~4,800 settles/s: the last 2 s of settles, ~9,500, are kept). `root`: the checkout whose dist/ is measured (default:
// this one), to compare builds. No Redis: the subscriber is never opened.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(process.argv[2] ?? new URL('..', import.meta.url).pathname);
const load = (path) => import(pathToFileURL(resolve(root, path)).href);
const { WaitingDuplicates } = await load('dist/idempotency/waiting-duplicates.js');
const { UniqueJobsKeys } = await load('dist/redis/keys.js');
const { Redis } = await load('node_modules/ioredis/built/index.js');

const client = new Redis({ lazyConnect: true });
const quiet = { log() {}, warn() {}, error() {}, debug() {} };
const waiting = new WaitingDuplicates(client, new UniqueJobsKeys('settle-bench'), quiet);
waiting.listen = () => Promise.resolve();
const queue = { qualifiedName: 'bull:q' };
let now = 1e12;
Date.now = () => (now += 0.07); // called three times a job
const N = 200_000;
for (let round = 0; round < 3; round++) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < N; i++) {
    const id = `record-${round}-${i}`;
    waiting.holding(id, queue, `owner-${i}`);
    waiting.settled(id);
  }
  const ns = Number(process.hrtime.bigint() - started) / N;
  console.log(`round ${round + 1}: ${ns.toFixed(0)} ns per job (holding + settled)`);
}
client.disconnect();
