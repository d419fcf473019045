import { Logger, type LoggerService } from '@nestjs/common';

/** The minimal logger the library writes to. */
export interface LoggerLike {
  /** Absent: debug lines are dropped. */
  debug?(message: string): void;
  log(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** The context (Nest's `[UniqueJobs]`) of every line the library logs. */
export const LOGGER_CONTEXT = 'UniqueJobs';

const SILENT: LoggerLike = {
  debug: () => undefined,
  log: () => undefined,
  warn: () => undefined,
  error: () => undefined,
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
  if (hasContext) {
    return {
      debug: (message) => void logger.debug?.(message),
      log: (message) => void logger.log(message),
      warn: (message) => void logger.warn(message),
      error: (message) => void logger.error(message),
    };
  }
  return {
    debug: (message) => void logger.debug?.(message, LOGGER_CONTEXT),
    log: (message) => void logger.log(message, LOGGER_CONTEXT),
    warn: (message) => void logger.warn(message, LOGGER_CONTEXT),
    error: (message) => void logger.error(message, undefined, LOGGER_CONTEXT),
  };
}
