import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

/**
 * Names of the library's Redis scripts (`lib/redis/scripts/<name>-<number of keys>.lua`, or `<name>-n.lua` for a script
 * taking any number of keys).
 */
export type ScriptName =
  | 'acquireLock'
  | 'renewLock'
  | 'relockDeduplication'
  | 'releaseDeduplication'
  | 'releaseMarked'
  | 'releaseAttemptSlot'
  | 'retimeDeduplication'
  | 'retimeLock'
  | 'peekDeduplication'
  | 'lockHolder'
  | 'takeStamped'
  | 'holderAges'
  | 'deadSetAdd'
  | 'deadSetList'
  | 'deadSetGet'
  | 'deadSetTake'
  | 'deadSetClaim'
  | 'deadSetSettle'
  | 'idempotencyClaim'
  | 'idempotencyRenew'
  | 'idempotencySettle'
  | 'idempotencyRelease'
  | 'idempotencyHandOver'
  | 'idempotencyGet'
  | 'reapExpiredLeases'
  | 'reapLockOwner'
  | 'reapDeduplication'
  | 'reapIdempotencyClaim'
  | 'registerQueue'
  | 'countInJob'
  | 'markParked';

const SCRIPTS_DIR = new URL('./scripts/', import.meta.url);
const INCLUDE = /^--- @include "([\w/]+)"$/gm;
/** Comments: the `--[[ … ]]` header blocks and whole-line `--` comments (not sent to Redis: fewer bytes per EVAL). */
const COMMENTS = /^\s*--\[\[[\s\S]*?\]\]\s*$|^\s*--.*$/gm;

interface ScriptSource {
  readonly name: ScriptName;
  /** `undefined`: any number (sent before the keys). */
  readonly numberOfKeys: number | undefined;
  readonly lua: string;
  /**
   * The name of its ioredis command: the script's name and the start of its source's SHA-1, so that two versions of
   * the library sharing one client (a script whose keys or answer changed) never run each other's script.
   */
  readonly command: string;
}

let sources: readonly ScriptSource[] | undefined;

/** Reads every script once per process, resolving `--- @include "includes/x"` lines (each include once). */
function loadSources(): readonly ScriptSource[] {
  if (sources) return sources;
  const read = (file: string) => readFileSync(new URL(file, SCRIPTS_DIR), 'utf8');
  const expand = (lua: string, seen: Set<string>): string =>
    lua.replace(INCLUDE, (_line, include: string) => {
      if (seen.has(include)) return '';
      seen.add(include);
      return expand(read(`${include}.lua`), seen);
    });
  const loaded = readdirSync(SCRIPTS_DIR)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => {
      const match = /^(\w+)-(\d+|n)\.lua$/.exec(file);
      if (!match) throw new Error(`Unexpected script file name ${file}`);
      const lua = expand(read(file), new Set())
        .replace(COMMENTS, '')
        .replace(/\n{2,}/g, '\n')
        .trim();
      const numberOfKeys = match[2] === 'n' ? undefined : Number(match[2]);
      const command = `uniqueJobs_${match[1]}_${createHash('sha1').update(lua).digest('hex').slice(0, 12)}`;
      return { name: match[1] as ScriptName, numberOfKeys, lua, command };
    });
  // A script whose number of keys changed has a new file name: a stale copy of the old one must not shadow it.
  const seen = new Set<string>();
  for (const { name } of loaded) {
    if (seen.has(name)) throw new Error(`Two files of script ${name} in ${SCRIPTS_DIR.pathname}: remove the stale one`);
    seen.add(name);
  }
  sources = loaded;
  return sources;
}

let byName: ReadonlyMap<ScriptName, ScriptSource> | undefined;

function sourceOf(name: ScriptName): ScriptSource {
  byName ??= new Map(loadSources().map((source) => [source.name, source]));
  return byName.get(name)!;
}

/** Every script of the library (name and expanded Lua source, as sent to Redis): the health check loads them. */
export function scriptSources(): readonly { name: ScriptName; lua: string }[] {
  return loadSources();
}

type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

/**
 * The library's Lua scripts on one client. ioredis sends each by SHA (EVALSHA) and falls back to the source when the
 * server answers NOSCRIPT (after a restart, failover or SCRIPT FLUSH), so scripts are loaded once and re-loaded only
 * when needed.
 */
export class RedisScripts {
  constructor(
    /** The client the scripts run on. */
    readonly client: Redis | Cluster,
  ) {
    for (const { command, numberOfKeys, lua } of loadSources()) {
      if (!(command in client)) client.defineCommand(command, { numberOfKeys, lua });
    }
  }

  /** Runs a script: every key it touches is passed in `keys`. */
  run(name: ScriptName, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const source = sourceOf(name);
    const command = (this.client as unknown as Record<string, ScriptCommand>)[source.command];
    if (source.numberOfKeys === undefined) return command.call(this.client, keys.length, ...keys, ...args);
    return command.call(this.client, ...keys, ...args);
  }

  /** Runs a script here, or by its source on `inOrderOn` when given (see {@link runInOrder}). */
  runOn(
    inOrderOn: Redis | undefined,
    name: ScriptName,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return inOrderOn ? runInOrder(inOrderOn, name, keys, args) : this.run(name, keys, args);
  }
}

/**
 * Runs a script on `client` by sending its source (EVAL), independent of the server's script cache: there is no
 * NOSCRIPT answer to fall back from, so the script takes effect before any command sent on `client` after it. Used
 * where a write must land before BullMQ's next command on its own connection (see docs/performance.md).
 */
export function runInOrder(
  client: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  const { lua } = sourceOf(name);
  return client.eval(lua, keys.length, ...keys, ...args);
}
