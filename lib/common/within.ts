/**
 * `step`'s value, or `undefined` when it fails or has not settled within `ms`: a bounded wait for an answer that may
 * never come (a Redis out of reach, a pool with no connection free). The step is not cancelled; its late failure is
 * not an unhandled rejection, and the timer is cleared as soon as either settles.
 */
export async function within<T>(step: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([step.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}
