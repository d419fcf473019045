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
  const lockNames = Object.keys(LOCKS);
  if (!lockNames.includes(options.lock)) {
    fail('lock', `must be one of ${lockNames.join(', ')} (got ${JSON.stringify(options.lock)})`);
  }
  const lock = LOCKS[options.lock];
  const merged = { ...DEFAULT_JOB_OPTIONS, ...stripUndefined(defaults ?? {}), ...stripUndefined(options) };

  const integer = (option: keyof UniqueJobDefaults, min: number, value: unknown) => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
      fail(
        option,
        `must be an integer ≥ ${min}${option === 'lockLimit' ? '' : ' (milliseconds)'} (got ${String(value)})`,
      );
    }
  };
  integer('lockTimeout', 0, merged.lockTimeout);
  integer('lockLimit', 1, merged.lockLimit);
  integer('runtimeLockLease', 100, merged.runtimeLockLease);
  integer('rescheduleIn', 1, merged.rescheduleIn);
  integer('maxReschedules', 0, merged.maxReschedules);
  if (merged.lockTtl !== undefined) integer('lockTtl', 1, merged.lockTtl);
  if (lock.requiresTtl && merged.lockTtl === undefined) {
    fail('lockTtl', `is required for lock "${lock.type}" (milliseconds the lock lives)`);
  }

  const uniqueAcross = options.uniqueAcross === undefined ? [] : [options.uniqueAcross].flat();
  for (const value of uniqueAcross) {
    if (!UNIQUE_ACROSS.includes(value)) {
      fail('uniqueAcross', `values must be among ${UNIQUE_ACROSS.join(', ')} (got ${JSON.stringify(value)})`);
    }
  }

  const names = options.jobName === undefined ? [] : [options.jobName].flat();
  if (options.jobName !== undefined && (names.length === 0 || names.some((n) => typeof n !== 'string' || n === ''))) {
    fail('jobName', 'must be a non-empty job name or a non-empty list of them');
  }

  if (options.lockArgs !== undefined) {
    if (typeof options.lockArgs === 'string') {
      const method = (processorClass as Record<string, unknown> | undefined)?.[options.lockArgs];
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

  const onConflict = options.onConflict ?? defaults?.onConflict;
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
  if (typeof onConflict === 'object' && onConflict !== null) {
    for (const key of Object.keys(onConflict)) {
      if (key !== 'client' && key !== 'server') fail(`onConflict.${key}`, 'is not a side; valid sides: client, server');
    }
  } else if (onConflict !== undefined && typeof onConflict !== 'string') {
    fail('onConflict', 'must be a strategy name or { client, server }');
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
    if (!strategy) fail(option, `must be one of ${valid.join(', ')} (got ${JSON.stringify(name)})`);
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

/** A copy without the properties whose value is `undefined` (so they do not override defaults). */
export function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Checks the module options that are not per-job. */
export function validateModuleOptions(options: UniqueJobsModuleOptions): void {
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError('UniqueJobsModule.forRoot', option, problem);
  };
  if (options.prefix !== undefined && (typeof options.prefix !== 'string' || !/^[\w.:-]+$/.test(options.prefix))) {
    fail('prefix', 'must be a non-empty string of letters, digits, _ . : - (no braces: the library adds hash tags)');
  }
  for (const [option, value] of Object.entries(options.deadSet ?? {})) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 1)) {
      fail(`deadSet.${option}`, 'must be an integer ≥ 1');
    }
  }
  for (const strategy of options.strategies ?? []) {
    const sides: unknown = strategy?.sides;
    const valid =
      typeof strategy?.name === 'string' &&
      Array.isArray(sides) &&
      sides.length > 0 &&
      sides.every(
        (side) =>
          (side === 'client' && typeof strategy.onClientConflict === 'function') ||
          (side === 'server' && typeof strategy.onServerConflict === 'function'),
      );
    if (!valid) {
      fail(
        `strategies (${String(strategy?.name)})`,
        'must list its sides ("client", "server") and implement onClientConflict for client and onServerConflict for server',
      );
    }
  }
  validateIdempotencyModuleOptions(options.idempotency);
  const defaultKeys = Object.keys(DEFAULT_JOB_OPTIONS);
  for (const key of Object.keys(options.defaults ?? {})) {
    if (!defaultKeys.includes(key))
      fail(`defaults.${key}`, `is not a per-job default; valid: ${defaultKeys.join(', ')}`);
  }
}
