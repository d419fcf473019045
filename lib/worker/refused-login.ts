import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import { loginRefusal } from '../redis/connections.js';

/** How long a job waits in delayed when Redis refused the library's login before its handler ran (ms). */
export const REFUSED_LOGIN_POSTPONE_MS = 5_000;

/**
 * A job whose start failed because Redis refused the login of the library's connection (a rotated password, a deleted
 * ACL user) before its handler ran: nothing was taken and nothing was done, so the job goes back to delayed for
 * {@link REFUSED_LOGIN_POSTPONE_MS} without using an attempt (as `reschedule` does), instead of spending its attempts
 * on a configuration error and failing for good. BullMQ moves it on the worker's own connection, which may well log in.
 * The caller asks only while the library's connection is known to be refused (its `error` event, which ioredis emits
 * before the failed commands' rejections are handled). Any other error, or no token to move the job with, is thrown as
 * it is.
 */
export async function postponeIfLoginRefused(
  job: Job<unknown, unknown>,
  token: string | undefined,
  error: unknown,
): Promise<never> {
  // An UnrecoverableError is the library's verdict on the job (e.g. lock arguments that cannot be hashed), whatever text
  // it quotes.
  const refusal = error instanceof UnrecoverableError ? undefined : loginRefusal(error);
  if (refusal === undefined || token === undefined) throw error;
  try {
    await job.moveToDelayed(Date.now() + REFUSED_LOGIN_POSTPONE_MS, token);
  } catch {
    throw error; // the worker's connection is refused too (it is the same login), or the job moved on: BullMQ decides
  }
  throw new DelayedError(
    `Postponed ${REFUSED_LOGIN_POSTPONE_MS} ms, its attempts untouched: Redis refused the login of the library's connection (${refusal})`,
  );
}
