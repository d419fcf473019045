import { types } from 'node:util';

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
  // A class's `prototype` cannot be reassigned; a function's can, and a method or an arrow has none. (Its source text
  // would not do: a method named `classroomId`, or `class (d) {…}`, starts with "class" too.)
  if (Object.getOwnPropertyDescriptor(fn, 'prototype')?.writable === false) {
    return `a class, which cannot be called: ${option} must be a plain function`;
  }
  return undefined;
}

/**
 * Whether `value` is a Promise or another thenable, which a synchronous callback of the user returned by mistake. A
 * native Promise's rejection, if any, is handled here (a rejection nobody handles ends a Node process; Node tracks
 * only native promises): the caller reports the mistake. Another thenable's `then` is never called: a lazy query
 * builder (Prisma, Knex, Mongoose) runs its query when it is.
 */
export function isThenable(value: unknown): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  if (types.isPromise(value)) {
    value.then(undefined, () => undefined);
    return true;
  }
  try {
    return typeof (value as { then?: unknown }).then === 'function';
  } catch {
    return false; // a getter that throws: not a thenable the caller can tell apart (it reports the throw itself)
  }
}
