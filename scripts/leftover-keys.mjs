// The end-of-run check of scripts/test.mjs: a test run must leave no key in the Redis it shares with other clients.
//
// Every name a suite makes with `uniqueName()` (test/support/redis.ts) is `<label>-<run tag><file tag><random>`: the
// run tag (6 hex digits, UNIQUE_JOBS_RUN_TAG, new for each run) says "this run", the file tag (4 hex digits of sha1 of
// the test file's path) says which file. At the end of the run, every key that carries the run tag was left by the run:
// the check lists them by file (with their TTL), deletes them (they are the run's own) and counts as one failed test.
// Keys of other clients are never touched: a key without the run tag is only counted, and only when it was not there
// in the snapshot taken at the start (another client's, or a suite's key made without `uniqueName`). Every database
// `INFO keyspace` lists is checked, not only the one of the URL: a suite that reaches another database (to test a
// mismatch) must clean up there too.
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A new run tag: 6 hex digits. */
export function newRunTag() {
  return randomBytes(3).toString('hex');
}

/** The file tag of a path relative to the repository, as test/support/redis.ts computes it. */
function fileTag(relativePath) {
  return createHash('sha1').update(relativePath.split(sep).join('/')).digest('hex').slice(0, 4);
}

/** file tag → test file (every .ts file under test/, so a helper module's tag is found too). */
function testFiles() {
  const tags = new Map([['ffff', '(a fixture process)']]);
  const walk = (dir) => {
    for (const entry of readdirSync(dir)) {
      if (entry === 'node_modules' || entry.startsWith('.')) continue;
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (entry.endsWith('.ts')) {
        const rel = relative(ROOT, path).split(sep).join('/');
        tags.set(fileTag(rel), rel);
      }
    }
  };
  walk(join(ROOT, 'test'));
  return tags;
}

async function client(url) {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, { maxRetriesPerRequest: 3, lazyConnect: true, connectTimeout: 5000 });
  redis.on('error', () => undefined);
  await redis.connect();
  return redis;
}

async function scanAll(redis, pattern) {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const key of batch) keys.push(key); // no spread: a run that left 100,000s of keys must not overflow the stack
  } while (cursor !== '0');
  return keys;
}

/** The databases holding keys now (`INFO keyspace`), with the client's own first. */
async function databases(redis) {
  const listed = [...(await redis.info('keyspace')).matchAll(/^db(\d+):/gm)].map((match) => Number(match[1]));
  const own = redis.options.db ?? 0;
  return [own, ...listed.filter((db) => db !== own)];
}

/** Each key of database `db` matching `pattern`, as `{ db, key }`. */
async function scanDatabase(redis, db, pattern) {
  await redis.select(db);
  return (await scanAll(redis, pattern)).map((key) => ({ db, key }));
}

/** How a key is shown and remembered: its name, after `<n>/` for a database other than the client's own. */
const named = (redis, { db, key }) => (db === (redis.options.db ?? 0) ? key : `${db}/${key}`);

/** The names of every key of the server, in every database, when the run starts (never their values). */
export async function snapshotKeys(url) {
  const redis = await client(url);
  try {
    const keys = new Set();
    for (const db of await databases(redis)) {
      for (const entry of await scanDatabase(redis, db, '*')) keys.add(named(redis, entry));
    }
    return keys;
  } finally {
    redis.disconnect();
  }
}

/**
 * The check. Prints what the run left, by file, deletes it, and resolves `true` when nothing was left. `ignore`:
 * patterns (RegExp) of keys a load generator or other known client writes meanwhile (only for the count of other keys).
 */
export async function checkLeftoverKeys(url, tag, before, { ignore = [/^redis-load-/] } = {}) {
  const redis = await client(url);
  try {
    // A uniqueName(): the run tag, then exactly 12 hex digits (file tag, random) and no more hex: a key of another
    // client that merely contains `-<tag>` (a UUID's segment) is not this run's.
    const ours = new RegExp(`-${tag}[0-9a-f]{12}(?![0-9a-f])`);
    const left = [];
    const other = [];
    for (const db of await databases(redis)) {
      for (const entry of await scanDatabase(redis, db, `*-${tag}*`)) if (ours.test(entry.key)) left.push(entry);
      for (const entry of await scanDatabase(redis, db, '*')) {
        if (ours.test(entry.key) || ignore.some((pattern) => pattern.test(entry.key))) continue;
        const name = named(redis, entry);
        if (!before.has(name)) other.push(name);
      }
    }
    left.sort((a, b) => a.db - b.db || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const files = testFiles();
    const byFile = new Map();
    for (const entry of left) {
      const at = entry.key.search(ours);
      const file = files.get(entry.key.slice(at + 1 + tag.length, at + 1 + tag.length + 4)) ?? '(unknown file)';
      const entries = byFile.get(file) ?? [];
      entries.push(entry);
      byFile.set(file, entries);
    }
    if (other.length > 0) {
      console.log(
        `leftover keys: ${other.length} key(s) without this run's tag appeared during the run (other clients of this ` +
          `Redis, or a suite's key not named by uniqueName()); not counted, not touched. First: ${other.slice(0, 5).join(', ')}`,
      );
    }
    if (left.length === 0) {
      console.log(`leftover keys: none (run tag ${tag})`);
      return true;
    }
    console.log(
      `leftover keys: FAILED, the run left ${left.length} key(s) in ${url} (run tag ${tag}; <n>/ names database n):`,
    );
    for (const [file, entries] of byFile) {
      const shown = [];
      for (const entry of entries.slice(0, 8)) {
        await redis.select(entry.db);
        const ttl = await redis.pttl(entry.key);
        shown.push(`${named(redis, entry)} (${ttl < 0 ? 'no TTL' : `TTL ${Math.round(ttl / 1000)} s`})`);
      }
      console.log(`  ${file}: ${entries.length} key(s): ${shown.join(', ')}${entries.length > 8 ? ', …' : ''}`);
    }
    for (let i = 0; i < left.length; i += 500) {
      const pipeline = redis.pipeline();
      for (const { db, key } of left.slice(i, i + 500)) pipeline.select(db).del(key);
      await pipeline.exec();
    }
    console.log(`leftover keys: deleted those ${left.length} key(s) (this run's own)`);
    return false;
  } finally {
    redis.disconnect();
  }
}
