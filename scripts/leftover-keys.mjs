// The end-of-run check of scripts/test.mjs: a test run must leave no key in the Redis it shares with other clients.
//
// Every name a suite makes with `uniqueName()` (test/support/redis.ts) is `<label>-<run tag><file tag><random>`: the
// run tag (6 hex digits, UNIQUE_JOBS_RUN_TAG, new for each run) says "this run", the file tag (4 hex digits of sha1 of
// the test file's path) says which file. At the end of the run, every key that carries the run tag was left by the run:
// the check lists them by file (with their TTL), deletes them (they are the run's own) and counts as one failed test.
// Keys of other clients are never touched: a key without the run tag is only counted, and only when it was not there
// in the snapshot taken at the start (another client's, or a suite's key made without `uniqueName`).
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
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** The names of every key of the server when the run starts (never their values). */
export async function snapshotKeys(url) {
  const redis = await client(url);
  try {
    return new Set(await scanAll(redis, '*'));
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
    const left = (await scanAll(redis, `*-${tag}*`)).filter((key) => ours.test(key)).sort();
    const files = testFiles();
    const byFile = new Map();
    for (const key of left) {
      const at = key.search(ours);
      const file = files.get(key.slice(at + 1 + tag.length, at + 1 + tag.length + 4)) ?? '(unknown file)';
      byFile.set(file, [...(byFile.get(file) ?? []), key]);
    }
    const other = (await scanAll(redis, '*')).filter(
      (key) => !before.has(key) && !ours.test(key) && !ignore.some((pattern) => pattern.test(key)),
    );
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
    console.log(`leftover keys: FAILED, the run left ${left.length} key(s) in ${url} (run tag ${tag}):`);
    for (const [file, keys] of byFile) {
      const ttls = await Promise.all(keys.map((key) => redis.pttl(key)));
      const shown = keys
        .slice(0, 8)
        .map((key, i) => `${key} (${ttls[i] < 0 ? 'no TTL' : `TTL ${Math.round(ttls[i] / 1000)} s`})`);
      console.log(`  ${file}: ${keys.length} key(s): ${shown.join(', ')}${keys.length > 8 ? ', …' : ''}`);
    }
    for (let i = 0; i < left.length; i += 500) await redis.del(...left.slice(i, i + 500));
    console.log(`leftover keys: deleted those ${left.length} key(s) (this run's own)`);
    return false;
  } finally {
    redis.disconnect();
  }
}
