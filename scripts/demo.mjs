// `npm run demo`: builds the library and the sample app, makes sure Redis is there (starting one on a free port if
// needed), and runs the sample app's demo end to end. Exits with the demo's status.
import { spawnSync } from 'node:child_process';
import { ensureRedisOrExit } from './services.mjs';

const redis = await ensureRedisOrExit();
const env = { ...process.env, REDIS_URL: redis.url };
const run = (command) => spawnSync('sh', ['-c', command], { stdio: 'inherit', env }).status ?? 1;
let status = run('npm run --silent build && npx tsc -p tsconfig.sample.json');
if (status === 0) status = run('node .build/sample/sample-app/src/demo.js');
await redis.stop();
process.exit(status);
