import { Logger, type LoggerService } from '@nestjs/common';

/** The minimal logger the library writes to. */
export interface LoggerLike {
  /** Absent: debug lines are dropped. */
  debug?(message: string): void;
  log(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  /**
   * Whether a line of this level would be written (absent: it would). Asked before a line is built, so that a level
   * the application's logger leaves out costs nothing (Nest's: its log levels).
   */
  enabled?(level: 'debug' | 'log' | 'warn' | 'error'): boolean;
}

/** The context (Nest's `[UniqueJobs]`) of every line the library logs. */
export const LOGGER_CONTEXT = 'UniqueJobs';

const SILENT: LoggerLike = {
  debug: () => undefined,
  log: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  enabled: () => false,
};

/**
 * The library's logger from the module option: Nest's `Logger` with context `UniqueJobs` by default, silent with
 * `false`. A Nest `Logger` that has a context of its own keeps it; any other logger gets the context as its last
 * argument (Nest's `LoggerService` convention), so it is never printed as a second message.
 */
export function loggerOf(option: LoggerService | false | undefined): LoggerLike {
  if (option === false) return SILENT;
  const logger: LoggerService = option ?? new Logger(LOGGER_CONTEXT);
  const hasContext =
    logger instanceof Logger && typeof (logger as unknown as { context?: unknown }).context === 'string';
  const enabled = levelCheckOf(logger);
  if (hasContext) {
    return {
      debug: (message) => void logger.debug?.(message),
      log: (message) => void logger.log(message),
      warn: (message) => void logger.warn(message),
      error: (message) => void logger.error(message),
      ...(enabled ? { enabled } : {}),
    };
  }
  return {
    debug: (message) => void logger.debug?.(message, LOGGER_CONTEXT),
    log: (message) => void logger.log(message, LOGGER_CONTEXT),
    warn: (message) => void logger.warn(message, LOGGER_CONTEXT),
    error: (message) => void logger.error(message, undefined, LOGGER_CONTEXT),
    ...(enabled ? { enabled } : {}),
  };
}

/**
 * How to ask a logger whether it writes a level: a Nest `Logger` by the application's log levels (`Logger.isLevelEnabled`,
 * asked each time: `app.useLogger` may change them after the module started), a logger with `isLevelEnabled` of its own
 * (Nest's `ConsoleLogger`) by it; any other cannot be asked.
 */
function levelCheckOf(logger: LoggerService): LoggerLike['enabled'] {
  if (logger instanceof Logger) return (level) => Logger.isLevelEnabled(level);
  const own = (logger as { isLevelEnabled?: unknown }).isLevelEnabled;
  if (typeof own === 'function') return (level) => (own as (level: string) => boolean).call(logger, level) !== false;
  return undefined;
}
