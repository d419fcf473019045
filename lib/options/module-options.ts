import { Cluster, Redis } from 'ioredis';
import {
  describeOptionValue,
  integerProblem,
  isPlainObject,
  MAX_TIMER_MS,
  shortened,
} from '../common/option-values.js';
import { strategyRegistry } from '../conflicts/index.js';
import type { ConflictStrategy } from '../conflicts/conflict-strategy.interface.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import { validateIdempotencyModuleOptions } from '../idempotency/idempotency-options.js';
import { validateReaperOptions } from './reaper-options.js';
import { DEFAULT_DEAD_SET, DEFAULT_JOB_OPTIONS } from './defaults.js';
import { jobIntegerProblem, INTEGER_RANGES } from './job-options.js';
import type { UniqueJobsModuleOptions } from './unique-jobs-module-options.interface.js';

/**
 * The options `forRoot` accepts; anything else is a typo, reported at bootstrap. Typed as a record of every key of
 * {@link UniqueJobsModuleOptions}, so a new module option that is not listed here fails to compile.
 */
const MODULE_OPTIONS: Record<keyof UniqueJobsModuleOptions, true> = {
  connection: true,
  prefix: true,
  defaults: true,
  jobs: true,
  strategies: true,
  logger: true,
  logLevels: true,
  idempotency: true,
  enabled: true,
  enqueueTimeout: true,
  shutdownTimeout: true,
  deadSet: true,
  reaper: true,
};
const MODULE_OPTION_KEYS = Object.keys(MODULE_OPTIONS);
/** Smallest `deadSet.maxBytes` and `deadSet.maxEntryBytes`: room for a truncated entry with long ids. */
const MIN_ENTRY_BYTES = 1024;

/** Checks the module options that are not per-job (each job definition is checked when it is registered). */
export function validateModuleOptions(options: UniqueJobsModuleOptions): void {
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError('UniqueJobsModule.forRoot', option, problem);
  };
  if (!isPlainObject(options)) fail('options', `must be an object (got ${describeOptionValue(options)})`);
  for (const key of Object.keys(options)) {
    if (!MODULE_OPTION_KEYS.includes(key)) {
      fail(shortened(key), `is not an option; valid options: ${MODULE_OPTION_KEYS.join(', ')}`);
    }
  }
  const { connection } = options as { connection?: unknown };
  if (
    connection !== undefined &&
    !(connection instanceof Redis || connection instanceof Cluster) &&
    !(isPlainObject(connection) && [Object.prototype, null].includes(Object.getPrototypeOf(connection) as object))
  ) {
    fail(
      'connection',
      'must be ioredis connection options (a plain object: { host, port, db, … } or { url }) or an ioredis Redis or ' +
        `Cluster client (got ${describeOptionValue(connection)}); for a URL string, pass { url: '…' }`,
    );
  }
  if (options.prefix !== undefined && (typeof options.prefix !== 'string' || !/^[\w.:-]+$/.test(options.prefix))) {
    fail('prefix', 'must be a non-empty string of letters, digits, _ . : - (no braces: the library adds hash tags)');
  }
  for (const option of ['enqueueTimeout', 'shutdownTimeout'] as const) {
    const value = options[option];
    if (value === undefined || value === false) continue;
    const problem = integerProblem(value, 1, MAX_TIMER_MS, ' (milliseconds)');
    if (problem) fail(option, `${problem.replace(/ \(got/, ', or false (got')}`);
  }
  if (options.enabled !== undefined && typeof options.enabled !== 'boolean') {
    fail('enabled', `must be true or false (got ${describeOptionValue(options.enabled)})`);
  }
  const { logger } = options;
  if (
    logger !== undefined &&
    logger !== false &&
    !(
      typeof logger === 'object' &&
      logger !== null &&
      ['log', 'warn', 'error'].every((m) => typeof (logger as unknown as Record<string, unknown>)[m] === 'function')
    )
  ) {
    fail('logger', `must be false or a logger with log, warn and error methods (got ${describeOptionValue(logger)})`);
  }
  const deadSetKeys = Object.keys(DEFAULT_DEAD_SET);
  if (options.deadSet !== undefined && !isPlainObject(options.deadSet)) {
    fail('deadSet', `must be an object with ${deadSetKeys.join(', ')} (got ${describeOptionValue(options.deadSet)})`);
  }
  for (const [option, value] of Object.entries(options.deadSet ?? {})) {
    if (!deadSetKeys.includes(option)) {
      fail(`deadSet.${shortened(option)}`, `is not an option; valid: ${deadSetKeys.join(', ')}`);
    }
    // An entry's own fields (ids, queue, reason, times, the sha256 of a dropped payload) take a few hundred bytes:
    // a byte bound below MIN_ENTRY_BYTES could not be kept by a truncated entry.
    const min = option === 'maxBytes' || option === 'maxEntryBytes' ? MIN_ENTRY_BYTES : 1;
    if (value !== undefined && (!Number.isSafeInteger(value) || value < min)) {
      fail(
        `deadSet.${option}`,
        `must be an integer ≥ ${min} and ≤ ${Number.MAX_SAFE_INTEGER} (got ${describeOptionValue(value)})${min > 1 ? ': a truncated entry alone takes a few hundred bytes' : ''}`,
      );
    }
  }
  validateReaperOptions(options.reaper, fail);
  if (options.strategies !== undefined && !Array.isArray(options.strategies)) {
    fail('strategies', `must be a list of conflict strategies (got ${describeOptionValue(options.strategies)})`);
  }
  const builtIn = [...strategyRegistry().keys()];
  const strategyNames = new Set<unknown>(builtIn);
  const strategies = (options.strategies ?? []) as readonly (Partial<ConflictStrategy> | null | undefined)[];
  for (const strategy of strategies) {
    const sides: unknown = strategy?.sides;
    const valid =
      typeof strategy?.name === 'string' &&
      strategy.name !== '' &&
      Array.isArray(sides) &&
      sides.length > 0 &&
      sides.every(
        (side) =>
          (side === 'client' && typeof strategy.onClientConflict === 'function') ||
          (side === 'server' && typeof strategy.onServerConflict === 'function'),
      );
    if (!valid || !strategy) {
      return fail(
        `strategies (${typeof strategy?.name === 'string' ? shortened(strategy.name) : describeOptionValue(strategy?.name)})`,
        'must have a name, list its sides ("client", "server") and implement onClientConflict for client and onServerConflict for server',
      );
    }
    if (strategyNames.has(strategy.name)) {
      fail(
        `strategies (${shortened(strategy.name)})`,
        `reuses a strategy name; names taken: ${[...strategyNames].join(', ')} (built in: ${builtIn.join(', ')})`,
      );
    }
    strategyNames.add(strategy.name);
  }
  if (options.jobs !== undefined && !Array.isArray(options.jobs)) {
    fail('jobs', `must be a list of job definitions from defineUniqueJob (got ${describeOptionValue(options.jobs)})`);
  }
  (options.jobs ?? []).forEach((job: unknown, i) => {
    if (!isPlainObject(job) || !('queue' in job)) {
      fail(
        `jobs[${i}]`,
        `must be a job definition from defineUniqueJob, with a queue (got ${describeOptionValue(job)})`,
      );
    }
  });
  validateIdempotencyModuleOptions(options.idempotency);
  if (options.defaults !== undefined && !isPlainObject(options.defaults)) {
    fail('defaults', `must be an object of per-job defaults (got ${describeOptionValue(options.defaults)})`);
  }
  const defaultKeys = Object.keys(DEFAULT_JOB_OPTIONS);
  for (const key of Object.keys(options.defaults ?? {})) {
    if (!defaultKeys.includes(key)) {
      fail(`defaults.${shortened(key)}`, `is not a per-job default; valid: ${defaultKeys.join(', ')}`);
    }
  }
  // Checked here too, so a bad default is blamed on forRoot (and found even when no job uses it).
  for (const option of Object.keys(INTEGER_RANGES) as (keyof typeof INTEGER_RANGES)[]) {
    const value = options.defaults?.[option];
    const problem = value === undefined ? undefined : jobIntegerProblem(option, value);
    if (problem) fail(`defaults.${option}`, problem);
  }
  const onConflict: unknown = options.defaults?.onConflict;
  const names = [...strategyNames];
  const sidesOf = new Map<unknown, readonly string[]>(
    [...strategyRegistry().values(), ...strategies].map((strategy) => [strategy!.name, strategy!.sides ?? []]),
  );
  const known = (name: unknown) => names.includes(name);
  if (
    onConflict !== undefined &&
    !(typeof onConflict === 'string' && known(onConflict)) &&
    !(
      isPlainObject(onConflict) &&
      Object.entries(onConflict).every(
        ([side, name]) => (side === 'client' || side === 'server') && (name === undefined || known(name)),
      )
    )
  ) {
    fail(
      'defaults.onConflict',
      `must be a strategy name or { client, server } of them; strategies: ${names.join(', ')} (got ${describeOptionValue(onConflict)})`,
    );
  }
  // A strategy chosen for one side must apply on that side (else every job that takes the default would be refused,
  // blamed on its own options).
  for (const side of ['client', 'server'] as const) {
    const name = isPlainObject(onConflict) ? onConflict[side] : undefined;
    if (name !== undefined && !sidesOf.get(name)?.includes(side)) {
      const valid = names.filter((n) => sidesOf.get(n)?.includes(side));
      fail(
        `defaults.onConflict.${side}`,
        `${describeOptionValue(name)} cannot apply on the ${side} side (${side === 'client' ? 'at enqueue' : 'in the worker'}); valid ${side}-side strategies: ${valid.join(', ')}`,
      );
    }
  }
}
