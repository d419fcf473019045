// The lock configurations the model test draws from: every lock type with lockLimit 1 (the fast path, BullMQ's
// deduplication key) and 2 (the library's slot set), with and without lockTtl, and every strategy of each side. One job
// name per configuration, all on one processor per queue, so one booted app serves every sequence.
import fc from 'fast-check';
import type { LockType, UniqueJobOptions } from '../../lib/index.js';

export type ClientStrategy = 'log' | 'raise' | 'reject' | 'replace';
export type ServerStrategy = 'log' | 'raise' | 'reject' | 'reschedule';

/** The two queues: `plain`, and `capped`, whose worker has `maxStartedAttempts`. */
export type QueueRole = 'plain' | 'capped';

/** `maxStartedAttempts` of the `capped` queue's worker. */
export const MAX_STARTED_ATTEMPTS = 2;

export interface LockConfig {
  queue: QueueRole;
  lock: LockType;
  lockLimit: 1 | 2;
  /** `lockTtl` of an enqueue lock (always set for `until_expired`). */
  lockTtl: boolean;
  client?: ClientStrategy;
  server?: ServerStrategy;
}

/** Long enough to span a sequence: an `until_expired` period, a delay, a backoff or a reschedule ends only by a command. */
export const LONG = 60 * 60 * 1000;
/** `maxReschedules`: the second run-time conflict of one job falls back to `reject`. */
export const MAX_RESCHEDULES = 1;

const CLIENT: readonly ClientStrategy[] = ['log', 'raise', 'reject', 'replace'];
const SERVER: readonly ServerStrategy[] = ['log', 'raise', 'reject', 'reschedule'];
const LOCKS: readonly LockType[] = [
  'until_executing',
  'until_executed',
  'until_expired',
  'while_executing',
  'until_and_while_executing',
];

const enqueueSide = (lock: LockType) => lock !== 'while_executing';
const runtimeSide = (lock: LockType) => lock === 'while_executing' || lock === 'until_and_while_executing';

/** Every configuration of one queue (without `queue`). */
function allConfigs(): Omit<LockConfig, 'queue'>[] {
  const configs: Omit<LockConfig, 'queue'>[] = [];
  for (const lock of LOCKS) {
    for (const lockLimit of [1, 2] as const) {
      const ttls = lock === 'until_expired' ? [true] : enqueueSide(lock) ? [false, true] : [false];
      for (const lockTtl of ttls) {
        for (const client of enqueueSide(lock) ? CLIENT : [undefined]) {
          for (const server of runtimeSide(lock) ? SERVER : [undefined]) {
            configs.push({ lock, lockLimit, lockTtl, client, server });
          }
        }
      }
    }
  }
  return configs;
}

export const CONFIGS = allConfigs();

/** The job name of a configuration (the same on both queues). */
export function jobNameOf(config: Omit<LockConfig, 'queue'>): string {
  return [
    config.lock,
    `x${config.lockLimit}`,
    config.lockTtl ? 'ttl' : 'nottl',
    config.client ?? '-',
    config.server ?? '-',
  ]
    .join('.')
    .replace(/_/g, '-');
}

/** The lock arguments of every model job: its `key` (one per digest of a sequence). */
export const lockArgs = (data: { key: string }) => data.key;

/** The `@UniqueJob` options of a configuration's job name. */
export function uniqueOptionsOf(config: Omit<LockConfig, 'queue'>): UniqueJobOptions<{ key: string }> {
  const onConflict =
    config.client && config.server
      ? { client: config.client, server: config.server }
      : (config.client ?? config.server ?? 'log');
  return {
    jobName: jobNameOf(config),
    lock: config.lock,
    lockArgs,
    lockLimit: config.lockLimit,
    onConflict,
    ...(config.lockTtl ? { lockTtl: LONG } : {}),
    ...(config.server === 'reschedule' ? { rescheduleIn: LONG, maxReschedules: MAX_RESCHEDULES } : {}),
  };
}

/**
 * Features switched off for a run (`MODEL_DISABLE=jobId:reuse,action:nameDelayed,until_expired,limit:2,…`): to look
 * past a known failure for the next one, or to check a fix one failure at a time. Tokens: lock types, `limit:1|2`,
 * `ttl`, `queue:capped`, `client:<strategy>`, `server:<strategy>`; command features `jobId:fresh`, `jobId:reuse`,
 * `delay`, `removeOnComplete`, `priority`, `via:add`, `via:enqueue`, `bulk`, `action:<action>`, `promote`,
 * `changeDelay`, `remove`, `retry`, `drain`, `clean`, `obliterate`, `stall`, `reap`.
 */
export const DISABLED: ReadonlySet<string> = new Set(
  (process.env.MODEL_DISABLE ?? '')
    .split(',')
    .map((token) => token.trim())
    .filter(Boolean),
);

function configEnabled(config: LockConfig): boolean {
  const tokens = [
    config.lock,
    `limit:${config.lockLimit}`,
    `queue:${config.queue}`,
    config.lockTtl && config.lock !== 'until_expired' ? 'ttl' : '',
    config.client ? `client:${config.client}` : '',
    config.server ? `server:${config.server}` : '',
  ];
  return !tokens.some((token) => DISABLED.has(token));
}

/** A configuration per sequence: each lock type equally often, the fast path (lockLimit 1) and the general path (2). */
export const lockConfig: fc.Arbitrary<LockConfig> = fc
  .record({
    queue: fc.constantFrom<QueueRole>('plain', 'capped'),
    lock: fc.constantFrom(...LOCKS),
    lockLimit: fc.constantFrom<1 | 2>(1, 2),
    lockTtl: fc.boolean(),
    client: fc.constantFrom(...CLIENT),
    server: fc.constantFrom(...SERVER),
  })
  .map(({ queue, lock, lockLimit, lockTtl, client, server }) => ({
    queue,
    lock,
    lockLimit,
    lockTtl: lock === 'until_expired' || (enqueueSide(lock) && lockTtl),
    ...(enqueueSide(lock) ? { client } : {}),
    ...(runtimeSide(lock) ? { server } : {}),
  }))
  .filter(configEnabled);

export function describeConfig(config: LockConfig): string {
  const sides = [config.client && `client ${config.client}`, config.server && `server ${config.server}`]
    .filter(Boolean)
    .join(', ');
  return `${config.lock}, lockLimit ${config.lockLimit}${config.lockTtl ? ', lockTtl 1 h' : ''}, ${sides}, queue ${config.queue}`;
}
