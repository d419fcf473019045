// Generators for the option-validation properties: well-formed @UniqueJob / job definition / @IdempotencyKey /
// forRoot option sets, and the same sets with one to three faults, each fault saying which option the error must name
// and what its message must say (the option's valid values). The idempotency generators name two stores, "sql" (with
// transactions) and "cache" (without): the spec provides them.
import { WorkerHost } from '@nestjs/bullmq';
import fc from 'fast-check';
import { LOCKS, type LockType } from '../../lib/index.js';
import { strategyRegistry } from '../../lib/conflicts/index.js';
import { setProperty } from './arbitraries.js';

export type Options = Record<string, unknown>;

/** One thing wrong with an option set: what it does, the option the error must name, what the message must say. */
export interface Corruption {
  option: string;
  hints: string[];
  apply(options: Options): void;
}

/** A malformed option set, with what each of its faults must be reported as. */
interface Malformed {
  options: Options;
  faults: Corruption[];
}

const LOCK_NAMES = Object.keys(LOCKS) as LockType[];
export const REGISTRY = strategyRegistry();
const STRATEGIES = [...REGISTRY.keys()];
const SIDES = ['client', 'server'] as const;
const strategiesOn = (side: (typeof SIDES)[number]) =>
  [...REGISTRY.values()].filter((s) => s.sides.includes(side)).map((s) => s.name);

/** The smallest valid value of each integer option of @UniqueJob. */
const JOB_INTEGERS = {
  lockTimeout: 0,
  lockLimit: 1,
  runtimeLockLease: 100,
  rescheduleIn: 1,
  maxReschedules: 0,
  lockTtl: 1,
} as const;
type JobInteger = keyof typeof JOB_INTEGERS;
const JOB_KEYS = ['lock', 'jobName', 'lockArgs', 'uniqueAcross', 'onConflict', ...Object.keys(JOB_INTEGERS)];

/** Whether a lock uses an integer option (setting one it never uses is refused). */
function uses(lock: LockType, option: JobInteger): boolean {
  const { locksAtEnqueue, locksWhileRunning } = LOCKS[lock];
  if (option === 'lockLimit') return true;
  if (option === 'lockTtl') return locksAtEnqueue;
  return locksWhileRunning;
}

/** The worker-side strategy `onConflict` gives a lock (the lock's default when unset), if it has that side. */
function serverStrategy(lock: LockType, onConflict: unknown): string | undefined {
  if (!LOCKS[lock].conflictSides.includes('server')) return undefined;
  if (typeof onConflict === 'string') return onConflict;
  const chosen = (onConflict as { server?: string } | undefined)?.server;
  return chosen ?? (lock === 'until_and_while_executing' ? 'reschedule' : 'log');
}

/** A circular object (JSON cannot show it). */
const circular = (() => {
  const value: Options = { a: 1 };
  value.self = value;
  return value;
})();

/** Values of every wrong type a configuration can hold (never `undefined`: that means "not set"). */
export const junk: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    true,
    false,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    -1,
    0,
    -0,
    1.5,
    -0.5,
    2 ** 53,
    '',
    ' ',
    '10',
    'log',
    'until_executed',
    [],
    [1],
    ['queues', 'x'],
    {},
    { client: 'log' },
    10n,
    Symbol('s'),
    () => 1,
    new Date(0),
    /x/,
    new Map(),
    Object.create(null) as object,
    circular,
  ),
  fc.string({ maxLength: 8 }),
  fc.double(),
  fc.integer({ min: -1_000_000, max: -1 }),
  fc.object({ maxDepth: 1, maxKeys: 2 }),
);

/** A plain object (what `{ client, server }` must be). */
const isPlain = (value: unknown) =>
  typeof value === 'object' &&
  value !== null &&
  [Object.prototype, null].includes(Object.getPrototypeOf(value) as object | null);
const isSafeIntegerAtLeast = (min: number) => (value: unknown) =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= min;
const notName = fc.string({ minLength: 1, maxLength: 10 }).filter((s) => !STRATEGIES.includes(s));
const notJobName: fc.Arbitrary<unknown> = fc.constantFrom<unknown>(
  '',
  [],
  [''],
  [1],
  ['a', ''],
  5,
  null,
  true,
  {},
  10n,
);

/** A static method name the processor classes below do not have (inherited function members included). */
const notStaticMethod = fc.oneof(
  fc.constantFrom('toString', 'bind', 'call', 'apply', 'constructor', 'name', 'length', 'prototype', 'pick2', 'Pick'),
  fc.string({ minLength: 1, maxLength: 8 }).filter((s) => s !== 'pick'),
);

/** A processor class with the static method `pick` (for `lockArgs: 'pick'`), as the decorator would see it. */
export class PickingProcessor extends WorkerHost {
  static pick(data: { id: string }): string {
    return data.id;
  }
  async process(): Promise<void> {}
}

const maybe = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined });

/** A well-formed `onConflict` for a lock: a name valid on each of its sides, or a name per side. */
function validOnConflict(lock: LockType): fc.Arbitrary<unknown> {
  const sides = LOCKS[lock].conflictSides;
  const everySide = STRATEGIES.filter((name) => sides.every((side) => strategiesOn(side).includes(name)));
  return fc.oneof(
    fc.constantFrom(...everySide),
    fc.record(Object.fromEntries(sides.map((side) => [side, fc.constantFrom(...strategiesOn(side))])), {
      requiredKeys: [],
    }),
  );
}

/** Well-formed @UniqueJob options (`definition`: a job definition, with a queue and no static-method lockArgs). */
export function validJobOptions(definition: boolean): fc.Arbitrary<{ lock: LockType; options: Options }> {
  return fc.constantFrom(...LOCK_NAMES).chain((lock) => {
    const integers = (Object.keys(JOB_INTEGERS) as JobInteger[]).filter((option) => uses(lock, option));
    const fields: Record<string, fc.Arbitrary<unknown>> = {
      onConflict: maybe(validOnConflict(lock)),
      uniqueAcross: maybe(
        fc.oneof(
          fc.constantFrom('queues', 'names'),
          fc.subarray(['queues', 'names'] as const),
        ) as fc.Arbitrary<unknown>,
      ),
      jobName: maybe(
        fc.oneof(fc.string({ minLength: 1 }), fc.uniqueArray(fc.string({ minLength: 1 }), { minLength: 1 })),
      ),
      lockArgs: maybe(definition ? fc.constant(() => 1) : fc.constantFrom<unknown>(() => 1, 'pick')),
      ...(definition ? { queue: fc.string({ minLength: 1 }) } : {}),
    };
    for (const option of integers) {
      const value = fc.integer({ min: JOB_INTEGERS[option], max: JOB_INTEGERS[option] + 10_000_000 });
      fields[option] = option === 'lockTtl' && LOCKS[lock].requiresTtl ? value : maybe(value);
    }
    return fc.record(fields).map((record) => {
      const options: Options = { lock };
      for (const [key, value] of Object.entries(record)) if (value !== undefined) options[key] = value;
      // The reschedule strategy's options only beside it (or a custom strategy): a built-in one never reads them.
      if (['log', 'raise', 'reject'].includes(serverStrategy(lock, options.onConflict) ?? '')) {
        delete options.rescheduleIn;
        delete options.maxReschedules;
      }
      return { lock, options };
    });
  });
}

/** Every way to get @UniqueJob options wrong, for options of `lock`. */
function jobCorruptions(lock: LockType, definition: boolean): fc.Arbitrary<Corruption>[] {
  const set = (option: string, value: unknown) => (options: Options) => setProperty(options, option, value);
  const corruptions: fc.Arbitrary<Corruption>[] = [
    fc
      .oneof(
        fc.constantFrom<unknown>('until_done', 'UNTIL_EXECUTED', 'until-executed', 'untilExecuted', undefined),
        junk.filter((v) => !LOCK_NAMES.includes(v as LockType)),
      )
      .map((value) => ({ option: 'lock', hints: [...LOCK_NAMES], apply: set('lock', value) })),
    fc
      .oneof(
        fc.constantFrom('lock_ttl', 'lockTTL', 'ttl', 'onconflict', 'lockargs', 'unique_across', 'jobname', 'lease'),
        fc.string({ minLength: 1, maxLength: 12 }),
      )
      .filter((key) => !JOB_KEYS.includes(key) && key !== 'queue')
      .map((key) => ({
        option: key,
        hints: [`"${key}" is not an option; valid options:`, ...JOB_KEYS],
        apply: set(key, 1),
      })),
    fc
      .oneof(
        junk.filter((v) => ![v].flat().every((x) => x === 'queues' || x === 'names')),
        junk.map((v) => ['queues', v]).filter(([, v]) => v !== 'queues' && v !== 'names'),
      )
      .map((value) => ({
        option: 'uniqueAcross',
        hints: ['values must be among queues, names'],
        apply: set('uniqueAcross', value),
      })),
    notJobName.map((value) => ({
      option: 'jobName',
      hints: ['must be a non-empty job name'],
      apply: set('jobName', value),
    })),
    junk
      .filter((v) => typeof v !== 'function' && typeof v !== 'string')
      .map((value) => ({
        option: 'lockArgs',
        hints: ['"lockArgs" must be a function'],
        apply: set('lockArgs', value),
      })),
    definition
      ? fc.constantFrom('pick', 'lockArgs').map((name) => ({
          option: 'lockArgs',
          hints: [`("${name}")`, 'use a function in a job definition'],
          apply: set('lockArgs', name),
        }))
      : notStaticMethod.map((name) => ({
          option: 'lockArgs',
          hints: [`names "${name}", which is not a static method`],
          apply: set('lockArgs', name),
        })),
    fc
      .oneof(
        junk.filter((v) => typeof v !== 'string' && !isPlain(v)),
        fc.constantFrom<unknown>(null, [], ['log'], () => 'log', 1, true, new Date(0), new Map([['client', 'log']])),
      )
      .map((value) => ({
        option: 'onConflict',
        hints: ['"onConflict" must be a strategy name or { client, server }'],
        apply: set('onConflict', value),
      })),
    notName.map((name) => ({
      option: 'onConflict',
      hints: ['must be one of', `(got ${JSON.stringify(name)})`],
      apply: set('onConflict', name),
    })),
    fc
      .string({ minLength: 1, maxLength: 8 })
      .filter((key) => key !== 'client' && key !== 'server')
      .map((key) => ({
        option: `onConflict.${key}`,
        hints: ['is not a side; valid sides: client, server'],
        apply: set('onConflict', Object.defineProperty({}, key, { value: 'log', enumerable: true })),
      })),
  ];
  for (const side of SIDES) {
    const sides = LOCKS[lock].conflictSides;
    if (!sides.includes(side)) {
      corruptions.push(
        fc.constantFrom(...strategiesOn(side)).map((name) => ({
          option: `onConflict.${side}`,
          hints: [`no ${side}-side conflicts`],
          apply: set('onConflict', { [side]: name }),
        })),
      );
    } else {
      corruptions.push(
        notName.map((name) => ({
          option: `onConflict.${side}`,
          hints: [`must be one of ${strategiesOn(side).join(', ')}`],
          apply: set('onConflict', { [side]: name }),
        })),
      );
    }
  }
  // A name valid on some side but not on every side the lock has: refused on the first side it cannot apply on.
  const sides = LOCKS[lock].conflictSides;
  const partial = STRATEGIES.filter((name) => !sides.every((side) => strategiesOn(side).includes(name)));
  if (partial.length > 0) {
    corruptions.push(
      fc.constantFrom(...partial).map((name) => {
        const side = sides.find((s) => !strategiesOn(s).includes(name))!;
        return {
          option: 'onConflict',
          hints: [`"${name}" cannot apply on the ${side} side`, `valid ${side}-side strategies:`],
          apply: set('onConflict', name),
        };
      }),
    );
  }
  for (const option of Object.keys(JOB_INTEGERS) as JobInteger[]) {
    const min = JOB_INTEGERS[option];
    if (uses(lock, option)) {
      corruptions.push(
        junk
          .filter((v) => !isSafeIntegerAtLeast(min)(v))
          .map((value) => ({
            option,
            hints: [`"${option}" must be an integer ≥ ${min}`],
            apply: set(option, value),
          })),
      );
    } else {
      corruptions.push(
        fc.integer({ min, max: min + 1000 }).map((value) => ({
          option,
          hints: [`"${option}" has no effect on lock "${lock}"`],
          apply: set(option, value),
        })),
      );
    }
  }
  if (LOCKS[lock].requiresTtl) {
    corruptions.push(
      fc.constant({
        option: 'lockTtl',
        hints: [`"lockTtl" is required for lock "${lock}"`],
        apply: (options: Options) => void delete options.lockTtl,
      }),
    );
  }
  if (definition) {
    corruptions.push(
      fc.constantFrom<unknown>('', 5, null, {}, ['q']).map((value) => ({
        option: 'queue',
        hints: ['"queue" must be the name of a queue'],
        apply: set('queue', value),
      })),
    );
  }
  return corruptions;
}

/** A valid option set with one to three faults (on distinct options). */
function withFaults(
  valid: fc.Arbitrary<{ options: Options; corruptions: fc.Arbitrary<Corruption>[] }>,
): fc.Arbitrary<Malformed> {
  return valid.chain(({ options, corruptions }) =>
    fc
      .uniqueArray(fc.oneof(...corruptions), { minLength: 1, maxLength: 3, selector: (c) => c.option })
      .map((faults) => {
        const copy = { ...options };
        for (const fault of faults) fault.apply(copy);
        return { options: copy, faults };
      }),
  );
}

export const malformedJob = (definition: boolean) =>
  withFaults(
    validJobOptions(definition).map(({ lock, options }) => ({
      options,
      corruptions: jobCorruptions(lock, definition),
    })),
  );

const IDEMPOTENCY_KEYS = [
  'key',
  'jobName',
  'scope',
  'fingerprint',
  'store',
  'transactional',
  'ttl',
  'lease',
  'onInProgress',
  'onFailure',
  'onMissingKey',
];
const CHOICES = { onInProgress: ['delay', 'fail'], onFailure: ['release', 'keep'], onMissingKey: ['error', 'run'] };
const IDEMPOTENCY_INTEGERS = { ttl: 1, lease: 100 };

export const validIdempotency: fc.Arbitrary<Options> = fc
  .record(
    {
      key: fc.constant((job: { data: { id: string } }) => job.data.id),
      jobName: maybe(
        fc.oneof(fc.string({ minLength: 1 }), fc.uniqueArray(fc.string({ minLength: 1 }), { minLength: 1 })),
      ),
      scope: maybe(fc.string({ minLength: 1 })),
      fingerprint: maybe(
        fc.oneof(
          fc.constantFrom<unknown>('data', false, (data: unknown) => data),
          fc.uniqueArray(fc.string({ minLength: 1 }), { minLength: 1 }),
        ),
      ),
      ttl: maybe(fc.integer({ min: 1, max: 10 ** 9 })),
      lease: maybe(fc.integer({ min: 100, max: 10 ** 7 })),
      onInProgress: maybe(fc.constantFrom(...CHOICES.onInProgress)),
      onFailure: maybe(fc.constantFrom(...CHOICES.onFailure)),
      onMissingKey: maybe(fc.constantFrom(...CHOICES.onMissingKey)),
      storeAndMode: maybe(
        fc.constantFrom<Options>(
          { store: 'sql', transactional: true },
          { store: 'sql' },
          { store: 'cache' },
          {
            transactional: false,
          },
        ),
      ),
    },
    { requiredKeys: ['key'] },
  )
  .map(({ storeAndMode, ...rest }) => {
    const options: Options = {};
    for (const [key, value] of Object.entries({ ...rest, ...storeAndMode })) {
      if (value !== undefined) options[key] = value;
    }
    return options;
  });

function idempotencyCorruptions(): fc.Arbitrary<Corruption>[] {
  const set = (option: string, value: unknown) => (options: Options) => setProperty(options, option, value);
  const corruptions: fc.Arbitrary<Corruption>[] = [
    fc
      .oneof(
        fc.constantFrom('leaseMs', 'TTL', 'keyFn', 'stores', 'lockTtl'),
        fc.string({ minLength: 1, maxLength: 10 }),
      )
      .filter((key) => !IDEMPOTENCY_KEYS.includes(key))
      .map((key) => ({
        option: key,
        hints: [`"${key}" is not an option; valid options:`, ...IDEMPOTENCY_KEYS],
        apply: set(key, 1),
      })),
    fc
      .oneof(
        junk.filter((v) => typeof v !== 'function'),
        fc.constant(undefined),
      )
      .map((value) => ({ option: 'key', hints: ['"key" must be a function of the job'], apply: set('key', value) })),
    notJobName.map((value) => ({
      option: 'jobName',
      hints: ['must be a non-empty job name'],
      apply: set('jobName', value),
    })),
    junk
      .filter((v) => typeof v !== 'string' || v === '')
      .map((value) => ({ option: 'scope', hints: ['"scope" must be a non-empty string'], apply: set('scope', value) })),
    junk
      .filter(
        (v) =>
          v !== 'data' &&
          v !== false &&
          typeof v !== 'function' &&
          !(Array.isArray(v) && v.length > 0 && v.every((f) => typeof f === 'string' && f !== '')),
      )
      .map((value) => ({
        option: 'fingerprint',
        hints: ['"fingerprint" must be \'data\', false, a non-empty list of top-level field names'],
        apply: set('fingerprint', value),
      })),
    fc
      .oneof(
        fc.constantFrom<unknown>('redis', 'SQL', '', 10n),
        junk.filter((v) => v !== 'sql' && v !== 'cache'),
      )
      .map((value) => ({
        option: 'store',
        hints: ['"store" names no store', 'sql, cache'],
        apply: set('store', value),
      })),
    junk
      .filter((v) => typeof v !== 'boolean')
      .map((value) => ({
        option: 'transactional',
        hints: ['"transactional" must be true or false'],
        apply: set('transactional', value),
      })),
    fc.constantFrom('cache', undefined).map((store) => ({
      option: 'transactional',
      hints: ['"transactional" needs a store with transactions'],
      apply: (options: Options) => {
        if (store === undefined) delete options.store;
        else options.store = store;
        options.transactional = true;
      },
    })),
  ];
  for (const [option, min] of Object.entries(IDEMPOTENCY_INTEGERS)) {
    corruptions.push(
      junk
        .filter((v) => !isSafeIntegerAtLeast(min)(v))
        .map((value) => ({
          option,
          hints: [`"${option}" must be an integer ≥ ${min} (milliseconds)`],
          apply: set(option, value),
        })),
    );
  }
  for (const [option, valid] of Object.entries(CHOICES)) {
    corruptions.push(
      fc
        .oneof(junk, fc.constantFrom('Delay', 'wait', 'retry', 'skip'))
        .filter((v) => !valid.includes(v as string))
        .map((value) => ({
          option,
          hints: [`"${option}" must be one of ${valid.map((v) => `'${v}'`).join(', ')}`],
          apply: set(option, value),
        })),
    );
  }
  return corruptions;
}

export const malformedIdempotency = withFaults(
  validIdempotency.map((options) => ({ options, corruptions: idempotencyCorruptions() })),
);

const MODULE_KEYS = [
  'connection',
  'prefix',
  'defaults',
  'jobs',
  'strategies',
  'logger',
  'idempotency',
  'enabled',
  'deadSet',
];

/** Every way to get forRoot options wrong (the module's own checks, not a job's). */
function moduleCorruptions(): fc.Arbitrary<Corruption>[] {
  const set = (option: string, value: unknown) => (options: Options) => setProperty(options, option, value);
  const notObject = junk.filter((v) => typeof v !== 'object' || v === null || Array.isArray(v));
  return [
    fc
      .oneof(
        fc.constantFrom('prefx', 'isGlobal2', 'redis', 'lockTtl', 'default'),
        fc.string({ minLength: 1, maxLength: 10 }),
      )
      .filter((key) => !MODULE_KEYS.includes(key) && key !== 'reaper')
      .map((key) => ({
        option: key,
        hints: [`"${key}" is not an option; valid options:`, ...MODULE_KEYS],
        apply: set(key, 1),
      })),
    fc
      .oneof(junk, fc.constantFrom('a{b}', 'has space', '', 'tab\t', 'new\nline', '*'))
      .filter((v) => !(typeof v === 'string' && /^[\w.:-]+$/.test(v)))
      .map((value) => ({ option: 'prefix', hints: ['no braces'], apply: set('prefix', value) })),
    junk
      .filter((v) => typeof v !== 'boolean')
      .map((value) => ({
        option: 'enabled',
        hints: ['"enabled" must be true or false'],
        apply: set('enabled', value),
      })),
    junk
      .filter((v) => v !== false && !(typeof v === 'object' && v !== null && 'log' in v))
      .map((value) => ({ option: 'logger', hints: ['log, warn and error'], apply: set('logger', value) })),
    notObject.map((value) => ({ option: 'deadSet', hints: ['maxSize, maxAge'], apply: set('deadSet', value) })),
    fc.constantFrom('maxsize', 'max', 'size').map((key) => ({
      option: `deadSet.${key}`,
      hints: ['is not an option; valid: maxSize, maxAge'],
      apply: set('deadSet', { [key]: 10 }),
    })),
    fc
      .tuple(
        fc.constantFrom('maxSize', 'maxAge'),
        junk.filter((v) => !isSafeIntegerAtLeast(1)(v)),
      )
      .map(([key, value]) => ({
        option: `deadSet.${key}`,
        hints: ['must be an integer ≥ 1'],
        apply: set('deadSet', { [key]: value }),
      })),
    junk
      .filter((v) => !Array.isArray(v))
      .map((value) => ({
        option: 'strategies',
        hints: ['must be a list of conflict strategies'],
        apply: set('strategies', value),
      })),
    fc.constantFrom(...STRATEGIES).map((name) => ({
      option: `strategies (${name})`,
      hints: ['reuses a strategy name', `built in: ${STRATEGIES.join(', ')}`],
      apply: set('strategies', [{ name, sides: ['client'], onClientConflict: async () => undefined }]),
    })),
    fc
      .constantFrom<unknown>(
        { name: 'x', sides: [] },
        { name: 'x', sides: ['client'] },
        { name: 'x', sides: ['server'] },
      )
      .map((strategy) => ({
        option: 'strategies (x)',
        hints: ['implement onClientConflict for client and onServerConflict for server'],
        apply: set('strategies', [strategy]),
      })),
    junk
      .filter((v) => !Array.isArray(v))
      .map((value) => ({ option: 'jobs', hints: ['must be a list of job definitions'], apply: set('jobs', value) })),
    fc.constantFrom<unknown>(null, 'payments', 5, [], {}).map((job) => ({
      option: 'jobs[0]',
      hints: ['must be a job definition from defineUniqueJob, with a queue'],
      apply: set('jobs', [job]),
    })),
    notObject.map((value) => ({
      option: 'idempotency',
      hints: ['"idempotency" must be an object'],
      apply: set('idempotency', value),
    })),
    fc.constantFrom('stores', 'defaults').chain((key) =>
      notObject.map((value) => ({
        option: `idempotency.${key}`,
        hints: [`"idempotency.${key}" must be an object`],
        apply: set('idempotency', { [key]: value }),
      })),
    ),
    fc
      .constantFrom<[string, number]>(...Object.entries(IDEMPOTENCY_INTEGERS))
      .chain(([key, min]) => junk.filter((v) => !isSafeIntegerAtLeast(min)(v)).map((value) => [key, value] as const))
      .map(([key, value]) => ({
        option: `idempotency.defaults.${key}`,
        hints: ['must be an integer'],
        apply: set('idempotency', { defaults: { [key]: value } }),
      })),
    notObject.map((value) => ({
      option: 'defaults',
      hints: ['"defaults" must be an object'],
      apply: set('defaults', value),
    })),
    fc.constantFrom('lock', 'lock_ttl', 'jobName', 'lockArgs').map((key) => ({
      option: `defaults.${key}`,
      hints: ['is not a per-job default; valid:'],
      apply: set('defaults', { [key]: 1 }),
    })),
    fc.constantFrom(...(Object.keys(JOB_INTEGERS) as JobInteger[])).chain((key) =>
      junk
        .filter((v) => !isSafeIntegerAtLeast(JOB_INTEGERS[key])(v))
        .map((value) => ({
          option: `defaults.${key}`,
          hints: [`must be an integer ≥ ${JOB_INTEGERS[key]}`],
          apply: set('defaults', { [key]: value }),
        })),
    ),
    fc
      .oneof(notName, fc.constantFrom<unknown>({ client: 'nope' }, { sever: 'log' }, 5, null, ['log']))
      .map((value) => ({
        option: 'defaults.onConflict',
        hints: ['must be a strategy name or { client, server } of them', STRATEGIES.join(', ')],
        apply: set('defaults', { onConflict: value }),
      })),
  ];
}

export const validModule: fc.Arbitrary<Options> = fc
  .record(
    {
      prefix: fc.stringMatching(/^[\w.:-]{1,20}$/),
      enabled: fc.boolean(),
      logger: fc.constant(false),
      deadSet: fc.record(
        { maxSize: fc.integer({ min: 1, max: 10 ** 6 }), maxAge: fc.integer({ min: 1 }) },
        { requiredKeys: [] },
      ),
      defaults: fc.record(
        {
          lockTimeout: fc.nat(),
          lockLimit: fc.integer({ min: 1, max: 9 }),
          onConflict: fc.constantFrom('log', 'raise'),
        },
        { requiredKeys: [] },
      ),
      idempotency: fc.record({
        defaults: fc.record({ ttl: fc.integer({ min: 1, max: 10 ** 9 }) }, { requiredKeys: [] }),
      }),
    },
    { requiredKeys: [] },
  )
  .map((options) => options as Options);

export const malformedModule = withFaults(
  validModule.map((options) => ({ options, corruptions: moduleCorruptions() })),
);
