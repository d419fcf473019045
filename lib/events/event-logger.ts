import type { Observable, Subscription } from 'rxjs';
import { InvalidUniqueJobOptionsError } from '../errors/invalid-unique-job-options.error.js';
import type { LoggerLike } from '../common/logger.js';
import type { UniqueJobEvent } from './unique-job-event.interface.js';

/** The level of the line logged for an event (`false`: none). */
export type EventLogLevel = 'debug' | 'log' | 'warn' | 'error' | false;

/** `forRoot({ logLevels })`: the level of the line logged for each event type, over {@link DEFAULT_EVENT_LOG_LEVELS}. */
export type UniqueJobsLogLevels = Partial<Record<UniqueJobEvent['type'], EventLogLevel>>;

/**
 * The line each event gets by default. Transitions the library already logs where they happen, with more detail, are
 * `false` here, so nothing is logged twice: `rejected` (the reject strategy warns, naming the dead-set entry),
 * `lockLost`, `idempotencyLeaseLost` and `error` (logged as errors), `duplicate` handled by the `log` strategy (which
 * warns) and `idempotencyMissingKey` run anyway (warned). So are the events every job has when all goes well (`locked`,
 * `unlocked`, `idempotencyClaimed`, `idempotencyCompleted`, `idempotencyReleased`, `idempotencyHandedOver`): Nest's
 * default logger writes every level, `debug` included, so a line each would be two to four lines per job in an
 * application that never chose its levels. `logLevels: { locked: 'debug', … }` turns them on. Nor has
 * `idempotencyInProgress` (a delivery waiting for the holder of its key): the outcome it waits for has its own line
 * (`idempotencyReplayed`), or it runs. Setting a level for any of these adds a line.
 */
export const DEFAULT_EVENT_LOG_LEVELS: Readonly<Record<UniqueJobEvent['type'], EventLogLevel>> = {
  locked: false,
  unlocked: false,
  duplicate: 'log',
  rescheduled: 'log',
  rejected: false,
  replaced: 'log',
  lockLost: false,
  reaped: 'log',
  error: false,
  idempotencyClaimed: false,
  idempotencyCompleted: false,
  idempotencyReplayed: 'log',
  idempotencyInProgress: false,
  idempotencyReleased: false,
  idempotencyHandedOver: false,
  idempotencyFailureKept: 'warn',
  idempotencyMismatch: 'warn',
  idempotencyLeaseLost: false,
  idempotencyMissingKey: 'warn',
};

const LEVELS: readonly EventLogLevel[] = ['debug', 'log', 'warn', 'error', false];

/** Checks `forRoot({ logLevels })`, so a typo fails the bootstrap. */
export function validateLogLevels(option: unknown): asserts option is UniqueJobsLogLevels | undefined {
  if (option === undefined) return;
  const fail = (what: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError('UniqueJobsModule.forRoot', what, problem);
  };
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    fail('logLevels', 'must be an object of event type → level');
  }
  const types = Object.keys(DEFAULT_EVENT_LOG_LEVELS);
  for (const [type, level] of Object.entries(option as object)) {
    if (!types.includes(type)) fail(`logLevels.${type}`, `is not an event type; valid: ${types.join(', ')}`);
    if (!LEVELS.includes(level as EventLogLevel)) {
      fail(`logLevels.${type}`, `must be one of 'debug', 'log', 'warn', 'error' or false`);
    }
  }
}

/**
 * Writes one line per event at its level: the option's for the types it names, else
 * {@link DEFAULT_EVENT_LOG_LEVELS}. Subscribes only when some type has a level. Lines name queue, job name, job id and
 * digest; idempotency lines name the scope and key, as the library's other idempotency messages do.
 */
export function logEvents(
  events$: Observable<UniqueJobEvent>,
  logger: LoggerLike,
  option: UniqueJobsLogLevels = {},
): Subscription | undefined {
  const levels = { ...DEFAULT_EVENT_LOG_LEVELS, ...option };
  if (Object.values(levels).every((level) => level === false)) return undefined;
  return events$.subscribe((event) => {
    const chosen = option[event.type];
    const level = chosen === undefined ? defaultLevelOf(event) : chosen;
    if (level !== false && logger.enabled?.(level) !== false) logger[level]?.(describeEvent(event));
  });
}

/**
 * Whether the event log lines would write a line for an event of this type (its level, the option's or the default,
 * is not `false`, and the logger writes that level): when not, and nothing else listens, the event need not be built.
 */
export function logsEventType(logger: LoggerLike, option: UniqueJobsLogLevels, type: UniqueJobEvent['type']): boolean {
  const level = option[type] ?? DEFAULT_EVENT_LOG_LEVELS[type];
  return level !== false && logger.enabled?.(level) !== false && (level !== 'debug' || logger.debug !== undefined);
}

function defaultLevelOf(event: UniqueJobEvent): EventLogLevel {
  // Logged where they happen (see DEFAULT_EVENT_LOG_LEVELS).
  if (event.type === 'duplicate' && event.strategy === 'log') return false;
  if (event.type === 'idempotencyMissingKey' && event.action === 'ran') return false;
  return DEFAULT_EVENT_LOG_LEVELS[event.type];
}

/** One line describing an event. */
export function describeEvent(event: UniqueJobEvent): string {
  if (event.type === 'reaped') {
    return `Reaped ${event.kind} ${event.key}${event.jobId === undefined ? '' : ` of job ${event.jobId}`}: ${event.reason}`;
  }
  const job = `job "${event.jobName}" on queue "${event.queue}"`;
  const digest = 'digest' in event && event.digest !== undefined ? ` (digest ${event.digest})` : '';
  const holder = (id: string | undefined) => `job ${id ?? '(unknown)'}`;
  switch (event.type) {
    case 'locked':
      return `Locked ${event.lock} lock of ${job} for job ${event.jobId}${digest}${
        event.waitedMs ? ` after waiting ${event.waitedMs} ms` : ''
      }`;
    case 'unlocked':
      return `Released ${event.lock} lock of ${job} held by job ${event.jobId}${digest}${
        event.heldMs === undefined ? '' : ` after ${event.heldMs} ms`
      }`;
    case 'duplicate':
      return `Duplicate ${job}${digest}, locked by ${holder(event.existingJobId)}: handled by strategy "${event.strategy}" (${event.side} side)`;
    case 'rescheduled':
      return `Rescheduled job ${event.jobId} (${job})${digest} in ${event.delay} ms (reschedule ${event.reschedules}): its lock is held`;
    case 'rejected':
      return `Rejected duplicate ${job}${digest}, locked by ${holder(event.existingJobId)}: kept in the dead set as ${event.deadSetEntryId}`;
    case 'replaced':
      return `Job ${event.jobId} replaced job ${event.replacedJobId} (${job})${digest}`;
    case 'lockLost':
      return `Run-time lock of job ${event.jobId} (${job})${digest} was lost`;
    case 'error':
      return `Bookkeeping for ${event.jobId === undefined ? job : `job ${event.jobId} (${job})`}${digest} failed: ${event.error.message}`;
    case 'idempotencyMissingKey':
      return `Job ${event.jobId} (${job}) has no idempotency key (the key function returned ${event.got}): ${event.action === 'ran' ? 'ran without idempotency' : 'failed'}`;
    default: {
      const key = `idempotency key "${event.key}" (scope "${event.scope}", store "${event.store}")`;
      switch (event.type) {
        case 'idempotencyClaimed':
          return `Job ${event.jobId} (${job}) claimed ${key}${event.takeover ? ', taking over an ended claim' : ''}`;
        case 'idempotencyCompleted':
          return `Job ${event.jobId} (${job}) completed ${key}`;
        case 'idempotencyReplayed':
          return `Job ${event.jobId} (${job}) replayed the ${event.state} result of ${key} without running`;
        case 'idempotencyInProgress':
          return `Job ${event.jobId} (${job}): ${key} is in progress in ${holder(event.holderJobId)}; ${
            event.action === 'delayed' ? `delayed until it settles (at most ${event.retryInMs} ms)` : 'failed'
          }`;
        case 'idempotencyReleased':
          return `Job ${event.jobId} (${job}) failed and released ${key}`;
        case 'idempotencyHandedOver':
          return `Job ${event.jobId} (${job}) ended a step (${event.step}) and kept ${key} for its next delivery (${event.leaseMs} ms at most)`;
        case 'idempotencyFailureKept':
          return `Job ${event.jobId} (${job}) failed for good; the failure of ${key} is kept`;
        case 'idempotencyMismatch':
          return `Job ${event.jobId} (${job}) reused ${key} with another payload`;
        case 'idempotencyLeaseLost':
          return `Job ${event.jobId} (${job}) lost its claim on ${key}`;
      }
    }
  }
}
