import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Thrown at application bootstrap when `@UniqueJob`, a job definition or the module options are invalid. The message
 * names where the options came from, the option, and the valid values.
 */
export class InvalidUniqueJobOptionsError extends UniqueJobsError {
  constructor(
    /** Where the options were declared, e.g. `SettlePaymentProcessor (@UniqueJob #1)`. */
    readonly source: string,
    /** The option at fault. */
    readonly option: string,
    /** What is wrong and what is valid. */
    readonly problem: string,
  ) {
    super(`Invalid unique job options in ${source}: "${option}" ${problem}`);
  }
}
