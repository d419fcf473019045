// `npm run demo`: builds the library (dist/) and the sample app (.build/sample/) unless they are up to date, makes sure
// Redis is there (REDIS_URL, else 127.0.0.1:6379, else a redis-server from PATH on a free port, stopped afterwards),
// and runs the sample app's demo (sample-app/demo/demo.ts): an API process and a worker process, the payments story
// replayed over HTTP, a table. Exits with the demo's status. DATABASE_URL set: PostgreSQL instead of the SQLite default.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureRedisOrExit } from './services.mjs';

const STAMP = '.build/sample/.built'; // written after a successful build of both

/** Newest modification time of a file or of the files under a directory (ms; 0 when missing). */
function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(
    0,
    ...readdirSync(path)
      .filter((name) => name !== 'data')
      .map((name) => newest(join(path, name))),
  );
}

const sources = ['lib', 'sample-app', 'package.json', 'tsconfig.json', 'tsconfig.build.json', 'tsconfig.sample.json'];
const upToDate = existsSync('dist/index.js') && Math.max(...sources.map(newest)) < newest(STAMP);

const redis = await ensureRedisOrExit();
const env = { ...process.env, REDIS_URL: redis.url };
const run = (command) => spawnSync('sh', ['-c', command], { stdio: 'inherit', env }).status ?? 1;
let status = 0;
if (upToDate) {
  console.log('The library (dist/) and the sample app (.build/sample/) are up to date.');
} else {
  console.log('Building the library (dist/) and the sample app (.build/sample/)…');
  // From scratch: a file removed from sample-app/ must not linger in .build/sample/.
  status = run('npm run --silent build && rm -rf .build/sample && npx tsc -p tsconfig.sample.json');
  if (status === 0) writeFileSync(STAMP, `${new Date().toISOString()}\n`);
}
if (status === 0) status = run('node .build/sample/sample-app/demo/demo.js');
await redis.stop();
process.exit(status);
