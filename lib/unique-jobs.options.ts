import { InvalidUniqueJobOptionsError } from './errors/invalid-unique-job-options.error.js';
import type { ConflictSide, ConflictStrategy } from './interfaces/conflict-strategy.interface.js';
import type {
  LockType,
  OnConflict,
  UniqueAcross,
  UniqueJobDefaults,
  UniqueJobDefinition,
  UniqueJobOptions,
} from './interfaces/unique-job-options.interface.js';
import type { UniqueJobsModuleOptions } from './interfaces/unique-jobs-module-options.interface.js';
import { strategyRegistry } from './conflicts/index.js';
import { LOCKS, type Lock } from './locks/index.js';
import { validateIdempotencyModuleOptions } from './idempotency/idempotency-options.js';

/** The defaults of every per-job option (overridable in `forRoot({ defaults })`). */
export const DEFAULT_JOB_OPTIONS: Readonly<UniqueJobDefaults> = {
  onConflict: 'log',
  lockTtl: undefined,
  lockTimeout: 0,
  lockLimit: 1,
  runtimeLockLease: 30_000,
  rescheduleIn: 5_000,
  maxReschedules: 10,
};

/** Default key prefix. */
export const DEFAULT_PREFIX = 'uniquejobs';

/** Lease of a general-path enqueue lock without `lockTtl` (a queued job does not renew it): 24 hours. */
export const DEFAULT_ENQUEUE_LEASE = 24 * 60 * 60 * 1000;

/** Default bounds of the dead set. */
export const DEFAULT_DEAD_SET = { maxSize: 10_000, maxAge: 7 * 24 * 60 * 60 * 1000 };

const OPTION_KEYS = [
  'lock',
  'jobName',
  'lockArgs',
  'uniqueAcross',
  ...(Object.keys(DEFAULT_JOB_OPTIONS) as (keyof UniqueJobDefaults)[]),
] as const;
const DEFINITION_KEYS = ['queue', ...OPTION_KEYS] as const;
const UNIQUE_ACROSS: readonly UniqueAcross[] = ['queues', 'names'];

/** The smallest valid value of each integer per-job option (`lockTtl` may also be left unset). */
const INTEGER_MINIMUMS = {
  lockTimeout: 0,
  lockLimit: 1,
  runtimeLockLease: 100,
  rescheduleIn: 1,
  maxReschedules: 0,
  lockTtl: 1,
} as const satisfies Partial<Record<keyof UniqueJobDefaults, number>>;

/** What is wrong with the value of an integer per-job option, or `undefined` when it is valid. */
function integerProblem(option: keyof typeof INTEGER_MINIMUMS, min: number, value: unknown): string | undefined {
  if (option === 'lockTtl' && value === undefined) return undefined;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min) return undefined;
  return `must be an integer ≥ ${min}${option === 'lockLimit' ? '' : ' (milliseconds)'} (got ${typeof value === 'string' ? value : describeOptionValue(value)})`;
}

/** Per-job options with every default applied and `uniqueAcross` normalized. */
export interface EffectiveJobOptions extends UniqueJobDefaults {
  lock: LockType;
  uniqueAcross: readonly UniqueAcross[];
}

/** Strategies chosen for each side, after validation. */
export interface ChosenStrategies {
  client?: ConflictStrategy;
  server?: ConflictStrategy;
}

/**
 * Checks one set of job options and applies the defaults. Every problem is reported at bootstrap with where the
 * options came from, the option and the valid values.
 */
export function resolveJobOptions(
  source: string,
  options: UniqueJobOptions | UniqueJobDefinition,
  defaults: Partial<UniqueJobDefaults> | undefined,
  strategies: ReadonlyMap<string, ConflictStrategy>,
  processorClass: object | undefined,
): { options: EffectiveJobOptions; strategies: ChosenStrategies } {
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError(source, option, problem);
  };
  if (typeof options !== 'object' || options === null) fail('options', 'must be an object');
  const allowed: readonly string[] = 'queue' in options ? DEFINITION_KEYS : OPTION_KEYS;
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) fail(key, `is not an option; valid options: ${allowed.join(', ')}`);
  }
  if ('queue' in options && (typeof options.queue !== 'string' || options.queue === '')) {
    fail('queue', `must be the name of a queue, a non-empty string (got ${describeOptionValue(options.queue)})`);
  }
  const lockNames = Object.keys(LOCKS);
  if (!lockNames.includes(options.lock)) {
    fail('lock', `must be one of ${lockNames.join(', ')} (got ${describeOptionValue(options.lock)})`);
  }
  const lock = LOCKS[options.lock];
  const merged = { ...DEFAULT_JOB_OPTIONS, ...stripUndefined(defaults ?? {}), ...stripUndefined(options) };

  for (const [option, min] of Object.entries(INTEGER_MINIMUMS) as [keyof typeof INTEGER_MINIMUMS, number][]) {
    const problem = integerProblem(option, min, merged[option]);
    if (problem) fail(option, problem);
  }
  if (lock.requiresTtl && merged.lockTtl === undefined) {
    fail('lockTtl', `is required for lock "${lock.type}" (milliseconds the lock lives)`);
  }

  const uniqueAcross = options.uniqueAcross === undefined ? [] : [options.uniqueAcross].flat();
  for (const value of uniqueAcross) {
    if (!UNIQUE_ACROSS.includes(value)) {
      fail('uniqueAcross', `values must be among ${UNIQUE_ACROSS.join(', ')} (got ${describeOptionValue(value)})`);
    }
  }

  const names = options.jobName === undefined ? [] : [options.jobName].flat();
  if (options.jobName !== undefined && (names.length === 0 || names.some((n) => typeof n !== 'string' || n === ''))) {
    fail('jobName', 'must be a non-empty job name or a non-empty list of them');
  }

  if (options.lockArgs !== undefined) {
    if (typeof options.lockArgs === 'string') {
      const method = staticMethodOf(processorClass, options.lockArgs);
      if (!processorClass) {
        fail(
          'lockArgs',
          `names a static method ("${options.lockArgs}"), which needs a processor class; use a function in a job definition`,
        );
      } else if (typeof method !== 'function') {
        fail('lockArgs', `names "${options.lockArgs}", which is not a static method of the processor class`);
      }
    } else if (typeof options.lockArgs !== 'function') {
      fail('lockArgs', 'must be a function (data, job) => args, or the name of a static method of the processor');
    }
  }

  // An option set on the job that its lock never uses is a mistake (a module-wide default may be unused).
  const unused: [keyof UniqueJobDefaults, boolean, string][] = [
    ['lockTtl', !lock.locksAtEnqueue, 'applies to locks taken at enqueue; a run-time lock uses runtimeLockLease'],
    ['lockTimeout', !lock.locksWhileRunning, 'applies to run-time locks (while_executing, until_and_while_executing)'],
    [
      'runtimeLockLease',
      !lock.locksWhileRunning,
      'applies to run-time locks (while_executing, until_and_while_executing)',
    ],
    ['rescheduleIn', !lock.locksWhileRunning, 'applies to the reschedule strategy, which needs a run-time lock'],
    ['maxReschedules', !lock.locksWhileRunning, 'applies to the reschedule strategy, which needs a run-time lock'],
  ];
  for (const [option, isUnused, reason] of unused) {
    if (isUnused && options[option] !== undefined) fail(option, `has no effect on lock "${lock.type}": it ${reason}`);
  }

  const onConflict = options.onConflict !== undefined ? options.onConflict : defaults?.onConflict;
  return {
    options: { ...merged, lock: options.lock, uniqueAcross },
    strategies: chooseStrategies(onConflict, lock, strategies, fail),
  };
}

/**
 * The strategy of each side the lock has. A side left unset gets the lock's default (`log`, or `reschedule` on the
 * server side of `until_and_while_executing`, whose queued copy must wait for the running one, not vanish).
 */
function chooseStrategies(
  onConflict: OnConflict | undefined,
  lock: Lock,
  registry: ReadonlyMap<string, ConflictStrategy>,
  fail: (option: string, problem: string) => never,
): ChosenStrategies {
  const sides = lock.conflictSides;
  const lockType = lock.type;
  const perSide: Partial<Record<ConflictSide, string>> =
    onConflict === undefined
      ? {}
      : typeof onConflict === 'string'
        ? Object.fromEntries(sides.map((side) => [side, onConflict]))
        : { ...onConflict };
  // { client, server } is a plain object: a Date, Map or array is no set of sides (and would read as {}).
  const prototype: unknown = isPlainObject(onConflict) ? Object.getPrototypeOf(onConflict) : undefined;
  if (prototype === Object.prototype || prototype === null) {
    for (const key of Object.keys(onConflict as object)) {
      if (key !== 'client' && key !== 'server') fail(`onConflict.${key}`, 'is not a side; valid sides: client, server');
    }
  } else if (onConflict !== undefined && typeof onConflict !== 'string') {
    fail('onConflict', `must be a strategy name or { client, server } (got ${describeOptionValue(onConflict)})`);
  }
  const chosen: ChosenStrategies = {};
  for (const side of ['client', 'server'] as const) {
    const name = perSide[side];
    const option = typeof onConflict === 'string' ? 'onConflict' : `onConflict.${side}`;
    if (name === undefined) {
      if (sides.includes(side)) chosen[side] = registry.get(lock.defaultStrategy[side]);
      continue;
    }
    if (!sides.includes(side)) {
      fail(
        option,
        `sets a ${side}-side strategy, but lock "${lockType}" has no ${side}-side conflicts (it has: ${sides.join(', ') || 'none'})`,
      );
    }
    const strategy = registry.get(name);
    const valid = [...registry.values()].filter((s) => s.sides.includes(side)).map((s) => s.name);
    if (!strategy) fail(option, `must be one of ${valid.join(', ')} (got ${describeOptionValue(name)})`);
    else if (!strategy.sides.includes(side)) {
      fail(
        option,
        `"${name}" cannot apply on the ${side} side (${side === 'client' ? 'at enqueue' : 'in the worker'}) for lock "${lockType}"; valid ${side}-side strategies: ${valid.join(', ')}`,
      );
    }
    chosen[side] = strategy;
  }
  return chosen;
}

/**
 * The static method `name` of a class or of one of its base classes, or `undefined`. What every function inherits from
 * `Function.prototype` (`toString`, `bind`, `call`, `constructor`…) is not a static method of the processor: taken for
 * `lockArgs`, `toString` would give every job one digest.
 */
export function staticMethodOf(processorClass: object | undefined, name: string): unknown {
  let owner: object | null | undefined = processorClass;
  for (; owner && owner !== Function.prototype; owner = Object.getPrototypeOf(owner) as object | null) {
    if (Object.hasOwn(owner, name)) {
      const method = (owner as Record<string, unknown>)[name];
      return typeof method === 'function' ? method : undefined;
    }
  }
  return undefined;
}

/** A copy without the properties whose value is `undefined` (so they do not override defaults). */
export function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

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
  deadSet: true,
  reaper: true,
};
const MODULE_OPTION_KEYS = Object.keys(MODULE_OPTIONS);

/** Checks the module options that are not per-job (each job definition is checked when it is registered). */
export function validateModuleOptions(options: UniqueJobsModuleOptions): void {
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError('UniqueJobsModule.forRoot', option, problem);
  };
  if (!isPlainObject(options)) fail('options', `must be an object (got ${describeOptionValue(options)})`);
  for (const key of Object.keys(options)) {
    if (!MODULE_OPTION_KEYS.includes(key)) {
      fail(key, `is not an option; valid options: ${MODULE_OPTION_KEYS.join(', ')}`);
    }
  }
  if (options.prefix !== undefined && (typeof options.prefix !== 'string' || !/^[\w.:-]+$/.test(options.prefix))) {
    fail('prefix', 'must be a non-empty string of letters, digits, _ . : - (no braces: the library adds hash tags)');
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
    if (!deadSetKeys.includes(option)) fail(`deadSet.${option}`, `is not an option; valid: ${deadSetKeys.join(', ')}`);
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 1)) {
      fail(`deadSet.${option}`, `must be an integer ≥ 1 (got ${describeOptionValue(value)})`);
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
        `strategies (${typeof strategy?.name === 'string' ? strategy.name : describeOptionValue(strategy?.name)})`,
        'must have a name, list its sides ("client", "server") and implement onClientConflict for client and onServerConflict for server',
      );
    }
    if (strategyNames.has(strategy.name)) {
      fail(
        `strategies (${strategy.name})`,
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
    if (!defaultKeys.includes(key))
      fail(`defaults.${key}`, `is not a per-job default; valid: ${defaultKeys.join(', ')}`);
  }
  // Checked here too, so a bad default is blamed on forRoot (and found even when no job uses it).
  for (const [option, min] of Object.entries(INTEGER_MINIMUMS) as [keyof typeof INTEGER_MINIMUMS, number][]) {
    const value = options.defaults?.[option];
    const problem = value === undefined ? undefined : integerProblem(option, min, value);
    if (problem) fail(`defaults.${option}`, problem);
  }
  const onConflict: unknown = options.defaults?.onConflict;
  const names = [...strategyNames];
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
}

/** Whether a value is an object (not null, not an array, not a function). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A value as option errors show it: JSON where it has a (short) JSON form, else what it is. Never throws, whatever the
 * value (BigInt, symbols, circular objects), so a malformed option always gets its InvalidUniqueJobOptionsError.
 */
export function describeOptionValue(value: unknown): string {
  try {
    switch (typeof value) {
      case 'string':
        return JSON.stringify(value);
      case 'bigint':
        return `${value}n`;
      case 'symbol':
        return value.toString();
      case 'function':
        return 'a function';
      case 'object':
        break;
      default:
        return String(value);
    }
    if (value === null) return 'null';
    const json = JSON.stringify(value);
    if (json !== undefined) return json.length > 80 ? `${json.slice(0, 77)}...` : json;
  } catch {
    // circular, a throwing toJSON or getter: say what it is instead
  }
  return Array.isArray(value) ? 'an array' : 'an object';
}

/** Checks `reaper` (module options). */
function validateReaperOptions(reaper: unknown, fail: (option: string, problem: string) => never): void {
  if (reaper === undefined) return;
  const valid = ['interval', 'batchSize', 'timeBudget', 'grace', 'queues'];
  if (!isPlainObject(reaper))
    fail('reaper', `must be an object with ${valid.join(', ')} (got ${describeOptionValue(reaper)})`);
  for (const [option, value] of Object.entries(reaper)) {
    if (!valid.includes(option)) fail(`reaper.${option}`, `is not an option; valid: ${valid.join(', ')}`);
    if (value === undefined || (option === 'interval' && value === false)) continue;
    if (option === 'queues') {
      const queues = Array.isArray(value) ? (value as unknown[]) : undefined;
      const ok = queues?.every(
        (queue) =>
          isPlainObject(queue) &&
          typeof (queue as { name?: unknown }).name === 'string' &&
          typeof (queue as { prefix?: unknown }).prefix === 'string',
      );
      if (!ok) fail('reaper.queues', `must be a list of { name, prefix } (got ${describeOptionValue(value)})`);
      continue;
    }
    const min = option === 'grace' ? 0 : 1;
    if (!Number.isSafeInteger(value) || (value as number) < min) {
      const what = option === 'interval' ? `an integer ≥ 1 (ms) or false` : `an integer ≥ ${min}`;
      fail(`reaper.${option}`, `must be ${what} (got ${describeOptionValue(value)})`);
    }
  }
}
