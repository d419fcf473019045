import type { ConflictStrategy } from '../conflicts/conflict-strategy.interface.js';
import {
  describeOptionValue,
  integerProblem,
  isPlainObject,
  MAX_TIMER_MS,
  shortened,
  stripUndefined,
} from '../common/option-values.js';
import { uncallable } from '../common/function-kind.js';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import type {
  ConflictSide,
  EffectiveJobOptions,
  OnConflict,
  UniqueAcross,
  UniqueJobDefaults,
  UniqueJobDefinition,
  UniqueJobOptions,
} from '../interfaces/unique-job-options.interface.js';
import { LOCKS, type Lock } from '../locks/index.js';
import { DEFAULT_JOB_OPTIONS } from './defaults.js';

const OPTION_KEYS = [
  'lock',
  'jobName',
  'lockArgs',
  'uniqueAcross',
  ...(Object.keys(DEFAULT_JOB_OPTIONS) as (keyof UniqueJobDefaults)[]),
] as const;
const DEFINITION_KEYS = ['queue', ...OPTION_KEYS] as const;
const UNIQUE_ACROSS: readonly UniqueAcross[] = ['queues', 'names'];

/**
 * The valid range of each integer per-job option (`lockTtl` may also be left unset). An option that becomes a Node
 * timer is bounded by {@link MAX_TIMER_MS}: a longer one would fire every millisecond.
 */
export const INTEGER_RANGES = {
  lockTimeout: [0, MAX_TIMER_MS],
  lockLimit: [1, undefined],
  runtimeLockLease: [100, MAX_TIMER_MS],
  rescheduleIn: [1, undefined],
  maxReschedules: [0, undefined],
  lockTtl: [1, undefined],
} as const satisfies Partial<Record<keyof UniqueJobDefaults, readonly [number, number | undefined]>>;

/** What is wrong with the value of an integer per-job option, or `undefined` when it is valid. */
export function jobIntegerProblem(option: keyof typeof INTEGER_RANGES, value: unknown): string | undefined {
  if (option === 'lockTtl' && value === undefined) return undefined;
  const [min, max] = INTEGER_RANGES[option];
  return integerProblem(
    value,
    min,
    max,
    option === 'lockLimit' || option === 'maxReschedules' ? '' : ' (milliseconds)',
  );
}

/** Strategies chosen for each side, after validation. */
export interface ChosenStrategies {
  client?: ConflictStrategy;
  server?: ConflictStrategy;
}

/** The built-in worker-side strategies, other than `reschedule`: `rescheduleIn` and `maxReschedules` mean nothing to them. */
const NEVER_RESCHEDULES: readonly string[] = ['log', 'raise', 'reject'];

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
  if (!isPlainObject(options)) {
    return fail('options', `must be an object with at least "lock" (got ${describeOptionValue(options)})`);
  }
  const allowed: readonly string[] = 'queue' in options ? DEFINITION_KEYS : OPTION_KEYS;
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) fail(shortened(key), `is not an option; valid options: ${allowed.join(', ')}`);
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

  for (const option of Object.keys(INTEGER_RANGES) as (keyof typeof INTEGER_RANGES)[]) {
    const problem = jobIntegerProblem(option, merged[option]);
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

  checkLockArgs(options.lockArgs, processorClass, fail);
  checkUnusedOptions(options, lock, fail);

  const fromDefaults = options.onConflict === undefined && defaults?.onConflict !== undefined;
  const onConflict = fromDefaults ? defaults.onConflict : options.onConflict;
  // A default that does not fit this job's lock is blamed on the default (the job's own options never named it).
  const failConflict = fromDefaults
    ? (option: string, problem: string): never =>
        fail(`defaults.${option}`, `${problem} (forRoot's default, taken by this job: set onConflict on it)`)
    : fail;
  const chosen = chooseStrategies(onConflict, lock, strategies, failConflict);
  // Set on the job beside a built-in worker-side strategy that never reschedules: a mistake (a custom one may read it).
  const server = chosen.server?.name;
  for (const option of ['rescheduleIn', 'maxReschedules'] as const) {
    if (options[option] !== undefined && server !== undefined && NEVER_RESCHEDULES.includes(server)) {
      fail(option, `has no effect with the worker-side strategy "${server}": it applies to the reschedule strategy`);
    }
  }
  return {
    options: { ...merged, onConflict: chosenNames(chosen, merged.onConflict), lock: options.lock, uniqueAcross },
    strategies: chosen,
  };
}

/**
 * `onConflict` as the job resolved it, each side's default applied: one name when every side the lock has uses it,
 * else `{ client, server }` (`until_and_while_executing` left unset: `{ client: 'log', server: 'reschedule' }`).
 */
function chosenNames({ client, server }: ChosenStrategies, given: OnConflict): OnConflict {
  if (client && server && client.name !== server.name) return { client: client.name, server: server.name };
  return (client ?? server)?.name ?? given; // a lock with no conflicts: as given
}

function checkLockArgs(
  lockArgs: UniqueJobOptions['lockArgs'],
  processorClass: object | undefined,
  fail: (option: string, problem: string) => never,
): void {
  if (lockArgs === undefined) return;
  if (typeof lockArgs === 'string') {
    const shown = `"${shortened(lockArgs)}"`;
    if (!processorClass) {
      fail(
        'lockArgs',
        `names a static method (${shown}), which needs a processor class; use a function in a job definition`,
      );
    }
    const method = staticMethodOf(processorClass, lockArgs);
    if (typeof method !== 'function') {
      fail('lockArgs', `names ${shown}, which is not a static method of the processor class`);
    }
    const problem = uncallable(method as () => unknown, 'lockArgs', 'the arguments themselves');
    if (problem) fail('lockArgs', `names ${shown}, ${problem}`);
  } else if (typeof lockArgs !== 'function') {
    fail('lockArgs', 'must be a function (data, job) => args, or the name of a static method of the processor');
  } else {
    const problem = uncallable(lockArgs, 'lockArgs', 'the arguments themselves');
    if (problem) fail('lockArgs', `is ${problem}`);
  }
}

/** An option set on the job that its lock never uses is a mistake (a module-wide default may be unused). */
function checkUnusedOptions(
  options: UniqueJobOptions,
  lock: Lock,
  fail: (option: string, problem: string) => never,
): void {
  const runtime = 'applies to run-time locks (while_executing, until_and_while_executing)';
  const reschedule = 'applies to the reschedule strategy, which needs a run-time lock';
  const unused: [keyof UniqueJobDefaults, ConflictSide, string][] = [
    ['lockTtl', 'client', 'applies to locks taken at enqueue; a run-time lock uses runtimeLockLease'],
    ['lockTimeout', 'server', runtime],
    ['runtimeLockLease', 'server', runtime],
    ['rescheduleIn', 'server', reschedule],
    ['maxReschedules', 'server', reschedule],
  ];
  for (const [option, side, reason] of unused) {
    if (!lock.conflictSides.includes(side) && options[option] !== undefined) {
      fail(option, `has no effect on lock "${lock.type}": it ${reason}`);
    }
  }
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
      if (key !== 'client' && key !== 'server') {
        fail(`onConflict.${shortened(key)}`, 'is not a side; valid sides: client, server');
      }
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
    if (!strategy) {
      fail(
        option,
        `must be one of ${valid.join(', ')} (the ${side}-side strategies, ${side === 'client' ? 'at enqueue' : 'in the worker'}, where lock "${lockType}" meets its conflicts), or a strategy registered in forRoot({ strategies }) (got ${describeOptionValue(name)})`,
      );
    } else if (!strategy.sides.includes(side)) {
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
