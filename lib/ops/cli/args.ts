import { parseArgs } from 'node:util';
import type { HeldLockKind } from '../inspection/lock-inspection.interface.js';
import type { LockType, UniqueAcross } from '../../interfaces/unique-job-options.interface.js';
import { LOCKS } from '../../locks/index.js';
import { CliError } from './errors/cli.error.js';

/** Every option of every command (each command reads the ones it uses). */
const OPTIONS = {
  redis: { type: 'string' },
  cluster: { type: 'boolean' },
  prefix: { type: 'string' },
  'bull-prefix': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  queue: { type: 'string' },
  name: { type: 'string' },
  kind: { type: 'string' },
  'job-id': { type: 'string' },
  limit: { type: 'string' },
  offset: { type: 'string' },
  cursor: { type: 'string' },
  yes: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  scope: { type: 'string' },
  'scope-json': { type: 'string' },
  'key-json': { type: 'string' },
  lock: { type: 'string' },
  'lock-args': { type: 'string' },
  'lock-args-json': { type: 'string' },
  'lock-limit': { type: 'string' },
  'lock-ttl': { type: 'string' },
  'unique-across': { type: 'string' },
  'max-scans': { type: 'string' },
  'registered-queues': { type: 'boolean' },
  timeout: { type: 'string' },
  grace: { type: 'string' },
} as const;

/** The parsed command line. */
export interface CliArgs {
  positionals: string[];
  values: {
    redis?: string;
    cluster?: boolean;
    prefix?: string;
    'bull-prefix'?: string;
    json?: boolean;
    help?: boolean;
    queue?: string;
    name?: string;
    kind?: string;
    'job-id'?: string;
    limit?: string;
    offset?: string;
    cursor?: string;
    yes?: boolean;
    'dry-run'?: boolean;
    scope?: string;
    'scope-json'?: string;
    'key-json'?: string;
    lock?: string;
    'lock-args'?: string;
    'lock-args-json'?: string;
    'lock-limit'?: string;
    'lock-ttl'?: string;
    'unique-across'?: string;
    'max-scans'?: string;
    'registered-queues'?: boolean;
    timeout?: string;
    grace?: string;
  };
}

/** Parses argv (without `node` and the script). @throws CliError on an unknown or malformed option. */
export function parseCliArgs(argv: readonly string[]): CliArgs {
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true });
    return { values, positionals };
  } catch (error) {
    throw new CliError((error as Error).message, undefined, true);
  }
}

/** An integer option within bounds, or `fallback` when absent. */
export function integerOption(name: string, value: string | undefined, fallback: number, min: number, max: number) {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new CliError(`--${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(value)})`);
  }
  return n;
}

/** `--kind`: `enqueue` or `runtime`. */
export function kindOption(value: string | undefined): HeldLockKind | undefined {
  if (value === undefined || value === 'enqueue' || value === 'runtime') return value;
  throw new CliError(`--kind must be "enqueue" or "runtime" (got ${JSON.stringify(value)})`);
}

/** `--lock`: a lock type (default `until_executed`). */
export function lockOption(value: string | undefined): LockType {
  if (value === undefined) return 'until_executed';
  if (Object.hasOwn(LOCKS, value)) return value as LockType;
  throw new CliError(`--lock must be one of ${Object.keys(LOCKS).join(', ')} (got ${JSON.stringify(value)})`);
}

/** `--unique-across`: a comma-separated list of `queues` and `names`. */
export function uniqueAcrossOption(value: string | undefined): UniqueAcross[] {
  if (value === undefined) return [];
  const items = value.split(',').map((item) => item.trim());
  for (const item of items) {
    if (item !== 'queues' && item !== 'names') {
      throw new CliError(`--unique-across takes "queues", "names" or "queues,names" (got ${JSON.stringify(value)})`);
    }
  }
  return [...new Set(items as UniqueAcross[])];
}

/** A name that goes into a key (a prefix): printable, no spaces, no glob characters. */
/** Whether `value` is a prefix the CLI takes (`--prefix`, `--bull-prefix`): {@link keyPartOption}'s rule. */
export function isKeyPart(value: string): boolean {
  return /^[\w{}.:@/-]{1,100}$/.test(value);
}

export function keyPartOption(name: string, value: string | undefined, fallback: string): string {
  if (value === undefined) return fallback;
  if (!isKeyPart(value)) {
    throw new CliError(
      `--${name} may hold letters, digits and _ { } . : @ / - only, 1 to 100 of them (got ${value.length > 100 ? `${value.length} characters` : JSON.stringify(value)})`,
    );
  }
  return value;
}

/** Reads a required positional argument. */
export function required(positionals: readonly string[], index: number, what: string): string {
  const value = positionals[index];
  if (value === undefined || value === '') throw new CliError(`Missing ${what}`, undefined, true);
  return value;
}

/**
 * Refuses positional arguments past the `count` a command takes: a script passing several ids must never see the
 * first handled and the others silently ignored (exit 0 while they are left as they were).
 */
export function noMoreThan(positionals: readonly string[], count: number, usage: string): void {
  if (positionals.length <= count) return;
  const extra = positionals[count];
  const shown = extra.length > 80 ? `${JSON.stringify(extra.slice(0, 80))}…` : JSON.stringify(extra);
  throw new CliError(`Unexpected argument ${shown}: ${usage}`, undefined, true);
}
