/**
 * Why a function the library calls synchronously for a value cannot be one, or `undefined`: an async function (it
 * returns a Promise), a generator (an iterator), a class (it cannot be called without `new`). `option` names it in the
 * message, `returns` says what it must return (e.g. "the arguments themselves").
 */
export function uncallable(fn: (...args: never[]) => unknown, option: string, returns: string): string | undefined {
  const kind = (Object.getPrototypeOf(fn) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  if (kind === 'AsyncFunction' || kind === 'AsyncGeneratorFunction') {
    return `an async function, which returns a Promise: ${option} must be synchronous and return ${returns}`;
  }
  if (kind === 'GeneratorFunction') {
    return `a generator function, which returns an iterator: ${option} must return ${returns}`;
  }
  if (Function.prototype.toString.call(fn).startsWith('class')) {
    return `a class, which cannot be called: ${option} must be a plain function`;
  }
  return undefined;
}

/**
 * Whether `value` is a Promise or another thenable, which a synchronous callback of the user returned by mistake. Its
 * rejection, if any, is handled here (a rejection nobody handles ends a Node process): the caller reports the mistake.
 */
export function isThenable(value: unknown): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  let then: unknown;
  try {
    then = (value as { then?: unknown }).then;
  } catch {
    return false; // a getter that throws: not a thenable the caller can tell apart (it reports the throw itself)
  }
  if (typeof then !== 'function') return false;
  try {
    (then as (ok: unknown, no: unknown) => unknown).call(value, undefined, () => undefined);
  } catch {
    // a thenable whose `then` throws: no rejection to handle
  }
  return true;
}
