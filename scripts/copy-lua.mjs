// Copies the Lua scripts next to the compiled redis-scripts.js: `node scripts/copy-lua.mjs <dir of redis/>`.
import { cpSync } from 'node:fs';
const target = process.argv[2];
if (!target) throw new Error('usage: node scripts/copy-lua.mjs <target redis dir>');
cpSync('lib/redis/scripts', `${target}/scripts`, { recursive: true });
