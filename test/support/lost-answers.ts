import type { Cluster, Redis } from 'ioredis';
import { RedisScripts, scriptSources, type ScriptName } from '../../lib/redis/redis-scripts.js';

/**
 * Makes the next call of the library's script `name` on `client` apply on Redis, then fail as a timed-out command does
 * (`Command timed out`): an answer lost after the server applied the command. `failed()` counts the calls failed so.
 */
export function failScriptAnswerOnce(client: Redis | Cluster, name: ScriptName): { failed: () => number } {
  new RedisScripts(client); // defines the library's commands on the client (the module reuses them)
  const { command } = scriptSources().find((source) => source.name === name) as unknown as { command: string };
  const commands = client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = commands[command];
  let failed = 0;
  commands[command] = async function (this: unknown, ...args: unknown[]) {
    const answer = await original.apply(this, args);
    if (failed > 0) return answer;
    failed++;
    throw new Error('Command timed out');
  };
  return { failed: () => failed };
}
