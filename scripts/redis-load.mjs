// Another client of a shared Redis, for proving that the suites pass while someone else uses the same server:
// `node scripts/redis-load.mjs [--url redis://127.0.0.1:6379] [--rate 3000] [--keys 20000] [--duration 1800]`.
//
// It writes and reads at about `--rate` commands a second (pipelined over four connections, plus a stream read with
// XREAD BLOCK and a pub/sub pair, like another BullMQ application), over a key space of its own of `--keys` keys
// (strings, hashes, lists, sorted sets; some with a TTL; keys deleted and created again all the time), every key under
// its own prefix `redis-load-<pid>-<random>:`. It never runs a server-wide command (no FLUSH*, CONFIG, DEBUG, SCRIPT
// FLUSH, CLIENT KILL, MONITOR). It stops by itself after `--duration` seconds, or on SIGINT/SIGTERM, then deletes every
// key of its prefix and exits. Prints one JSON line of figures every 10 s and one when it stopped.
import { randomBytes } from 'node:crypto';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    rate: { type: 'string', default: '3000' },
    keys: { type: 'string', default: '20000' },
    duration: { type: 'string', default: '1800' },
    prefix: { type: 'string' },
  },
});
const rate = Number(values.rate);
const keyCount = Number(values.keys);
const durationMs = Number(values.duration) * 1000;
if (!(rate > 0 && keyCount > 0 && durationMs > 0 && durationMs <= 6 * 3600_000)) {
  console.error('--rate, --keys and --duration (seconds, at most 6 h) must be positive numbers');
  process.exit(2);
}
const prefix = values.prefix ?? `redis-load-${process.pid}-${randomBytes(3).toString('hex')}`;
const TICK_MS = 20;
const LANES = 4;

const connect = () => {
  const client = new Redis(values.url, { maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  return client;
};
const lanes = Array.from({ length: LANES }, connect);
const reader = connect();
const subscriber = connect();

const key = (i) => `${prefix}:${['s', 'h', 'l', 'z'][i % 4]}:${i}`;
const stream = `${prefix}:stream`;
const channel = `${prefix}:events`;
const random = (n) => Math.floor(Math.random() * n);
const figures = { commands: 0, errors: 0, streamRead: 0, messages: 0, startedAt: Date.now() };

/** Creates key i (its type follows i % 4); one in eight expires after 5–60 s. */
function create(pipeline, i) {
  const k = key(i);
  switch (i % 4) {
    case 0:
      pipeline.set(k, randomBytes(32).toString('base64'));
      break;
    case 1:
      pipeline.hset(k, 'a', String(i), 'b', randomBytes(16).toString('hex'), 'c', String(Date.now()));
      break;
    case 2:
      pipeline.rpush(k, 'x', 'y', 'z');
      break;
    default:
      pipeline.zadd(k, 1, 'one', 2, 'two', 3, 'three');
  }
  if (i % 8 === 0) pipeline.expire(k, 5 + random(55));
  return 1 + (i % 8 === 0 ? 1 : 0);
}

/** One command of the mix on a random key; resolves how many commands it queued. */
function mixed(pipeline) {
  const i = random(keyCount);
  const k = key(i);
  switch (random(12)) {
    case 0:
      pipeline.del(k);
      return 1 + create(pipeline, i);
    case 1:
      pipeline.xadd(stream, 'MAXLEN', '~', '1000', '*', 'i', String(i));
      return 1;
    case 2:
      pipeline.publish(channel, String(i));
      return 1;
    case 3:
      pipeline.scan('0', 'MATCH', `${prefix}:s:1*`, 'COUNT', 100);
      return 1;
    case 4:
      pipeline.eval("return redis.call('EXISTS', KEYS[1])", 1, k);
      return 1;
    default:
      break;
  }
  switch (i % 4) {
    case 0:
      if (random(2)) pipeline.get(k);
      else pipeline.set(k, randomBytes(16).toString('hex'));
      return 1;
    case 1:
      if (random(2)) pipeline.hgetall(k);
      else pipeline.hincrby(k, 'n', 1);
      return 1;
    case 2:
      if (random(2)) pipeline.lrange(k, 0, -1);
      else pipeline.rpush(k, 'w').ltrim(k, -10, -1);
      return random(2) ? 1 : 2;
    default:
      if (random(2)) pipeline.zrangebyscore(k, 0, '+inf');
      else pipeline.zincrby(k, 1, 'one');
      return 1;
  }
}

async function fill() {
  for (let i = 0; i < keyCount; i += 1000) {
    const pipeline = lanes[0].pipeline();
    for (let j = i; j < Math.min(keyCount, i + 1000); j++) figures.commands += create(pipeline, j);
    await pipeline.exec();
  }
}

let stopping = false;
let stopped;
const stop = new Promise((resolve) => (stopped = resolve));
const onSignal = () => {
  stopping = true;
  stopped();
};
process.once('SIGINT', onSignal);
process.once('SIGTERM', onSignal);
const timer = setTimeout(onSignal, durationMs);

async function load() {
  const perTick = Math.max(1, Math.round((rate * TICK_MS) / 1000 / LANES));
  while (!stopping) {
    const started = Date.now();
    await Promise.all(
      lanes.map(async (lane) => {
        const pipeline = lane.pipeline();
        let queued = 0;
        while (queued < perTick) queued += mixed(pipeline);
        const results = (await pipeline.exec()) ?? [];
        figures.commands += results.length;
        figures.errors += results.filter(([error]) => error).length;
      }),
    );
    const spent = Date.now() - started;
    if (spent < TICK_MS) await new Promise((resolve) => setTimeout(resolve, TICK_MS - spent));
  }
}

async function readStream() {
  let last = '$';
  while (!stopping) {
    const answer = await reader.xread('COUNT', 100, 'BLOCK', 500, 'STREAMS', stream, last).catch(() => null);
    figures.commands++;
    for (const [, entries] of answer ?? []) {
      figures.streamRead += entries.length;
      if (entries.length > 0) last = entries[entries.length - 1][0];
    }
  }
}

async function cleanUp() {
  const cleaner = connect();
  let deleted = 0;
  let cursor = '0';
  try {
    do {
      const [next, keys] = await cleaner.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) deleted += await cleaner.del(...keys);
    } while (cursor !== '0');
  } finally {
    cleaner.disconnect();
  }
  return deleted;
}

const report = (extra = {}) => {
  const seconds = (Date.now() - figures.startedAt) / 1000;
  console.log(
    JSON.stringify({
      prefix,
      seconds: Math.round(seconds),
      commands: figures.commands,
      perSecond: Math.round(figures.commands / seconds),
      errors: figures.errors,
      streamRead: figures.streamRead,
      messages: figures.messages,
      ...extra,
    }),
  );
};

await subscriber.subscribe(channel);
subscriber.on('message', () => figures.messages++);
await fill();
console.log(JSON.stringify({ ready: true, prefix, keys: keyCount, rate }));
const ticker = setInterval(report, 10_000);
const work = Promise.all([load(), readStream()]);
await stop;
clearTimeout(timer);
clearInterval(ticker);
await work;
subscriber.disconnect();
reader.disconnect();
for (const lane of lanes) lane.disconnect();
report({ stopped: true, deleted: await cleanUp() });
process.exit(0);
