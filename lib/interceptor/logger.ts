import { Logger } from '@nestjs/common';
import type { UniqueJobsModuleOptions } from '../interfaces/unique-jobs-module-options.interface.js';

/** The minimal logger the library writes to. */
export interface LoggerLike {
  log(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** The library's logger from the module option: Nest's `Logger` by default, silent with `false`. */
export function loggerOf(option: UniqueJobsModuleOptions['logger']): LoggerLike {
  if (option === false) return { log: () => undefined, warn: () => undefined, error: () => undefined };
  const logger = option ?? new Logger('UniqueJobs');
  return {
    log: (message) => void logger.log(message, 'UniqueJobs'),
    warn: (message) => void logger.warn(message, 'UniqueJobs'),
    error: (message) => void logger.error(message, undefined, 'UniqueJobs'),
  };
}
