// Copies the Lua scripts next to the compiled redis-scripts.js: `node scripts/copy-lua.mjs <dir of redis/>`. The
// target folder is emptied first, so a script renamed in lib/ (its file name carries its key count) leaves no stale copy.
import { cpSync, rmSync } from 'node:fs';
const target = process.argv[2];
if (!target) throw new Error('usage: node scripts/copy-lua.mjs <target redis dir>');
rmSync(`${target}/scripts`, { recursive: true, force: true });
cpSync('lib/redis/scripts', `${target}/scripts`, { recursive: true });
