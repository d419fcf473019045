/** Longest `name` kept of a thrown value (UTF-16 code units). */
const MAX_NAME = 200;
/** Longest `message` kept of a thrown value (UTF-16 code units). */
const MAX_MESSAGE = 2_000;

/**
 * The name and message of anything a handler may throw, never throwing itself: an `Error`, a plain object with string
 * `name` / `message` (`{ name: 'CardDeclined', message: '…' }`), or any other value by its string form (a value with
 * none, such as a null-prototype object, is named as such). Both are cut to 200 and 2,000 UTF-16 code units (`…`
 * marks a cut, a surrogate pair is never split), so what is stored of a failure stays small whatever was thrown.
 */
export function describeThrown(thrown: unknown): { name: string; message: string } {
  const fields = typeof thrown === 'object' && thrown !== null ? (thrown as { name?: unknown; message?: unknown }) : {};
  const name = safely(() => fields.name);
  const message = safely(() => fields.message);
  return {
    name: cut(typeof name === 'string' && name !== '' ? name : 'Error', MAX_NAME),
    message: cut(typeof message === 'string' ? message : stringOf(thrown), MAX_MESSAGE),
  };
}

/** `thrown` as an `Error`: itself, or a new one carrying its {@link describeThrown} name and message. */
export function asError(thrown: unknown): Error {
  if (thrown instanceof Error) return thrown;
  const { name, message } = describeThrown(thrown);
  const error = new Error(message);
  error.name = name;
  return error;
}

/**
 * Throws `thrown` again, or an `Error` saying so in place of `null` or `undefined`: BullMQ reads the `name` of what a
 * processor threw, so with those its worker throws in turn and leaves the job active until it stalls (then runs it
 * again), and `job.shouldRetryJob(…)` fails too.
 */
export function rethrowNullish(thrown: unknown): never {
  if (thrown === null || thrown === undefined) throw new Error(`The handler threw ${String(thrown)}`);
  throw thrown; // eslint-disable-line @typescript-eslint/only-throw-error -- what the handler threw, as it threw it
}

function stringOf(value: unknown): string {
  try {
    return String(value);
  } catch {
    return `a thrown ${typeof value} without a string form`;
  }
}

/** A property read that may run a throwing getter (or a Proxy trap). */
function safely(read: () => unknown): unknown {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** `text` within `max` UTF-16 code units, `…` included; a surrogate pair is never split. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1; // a high surrogate whose low half would be cut off
  return `${text.slice(0, end)}…`;
}
