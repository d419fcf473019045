import { setTimeout as delay } from 'node:timers/promises';

/** Node's codes of a connection that could not be made or was cut (as opposed to an answer of the database). */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);

/** The network error (with the address and port tried, when it names them) in an error's causes, if any. */
export function networkError(
  error: unknown,
): { code: string; message: string; address?: string; port?: number } | undefined {
  const queue = [error];
  for (let i = 0; i < queue.length && i < 20; i++) {
    const e = queue[i] as { code?: unknown; message?: unknown; address?: string; port?: number } | null;
    if (typeof e !== 'object' || e === null) continue;
    if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) {
      return { code: e.code, message: String(e.message), address: e.address, port: e.port };
    }
    const { cause, errors, driverError } = e as { cause?: unknown; errors?: unknown; driverError?: unknown };
    queue.push(cause, driverError, ...(Array.isArray(errors) ? (errors as unknown[]) : []));
  }
  return undefined;
}

/** Node-postgres' words for a connection that ended under a query (no SQLSTATE: the socket closed). */
const CUT_MESSAGES = /Connection terminated|connection error and is not queryable|Client was closed/i;

/**
 * Whether an error says the connection was cut or refused rather than that the database answered no: a network error,
 * a SQLSTATE of class 08 (connection exception) or 57P01–57P03 (the server ended the session: an administrator's
 * `pg_terminate_backend`, a shutdown, a server starting up), or the driver's own "connection terminated". Such a
 * failure may pass with the next connection.
 */
export function connectionCut(error: unknown): boolean {
  if (networkError(error)) return true;
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && (code.startsWith('08') || /^57P0[123]$/.test(code))) return true;
    if (typeof message === 'string' && CUT_MESSAGES.test(message)) return true;
    e = (e as { cause?: unknown; driverError?: unknown }).driverError ?? (e as { cause?: unknown }).cause;
  }
  return false;
}

/** How many times {@link againOnCut} runs an operation in all; the pause after the first try (longer after each). */
export const CUT_ATTEMPTS = 4;
const CUT_RETRY_MS = 200;

/**
 * Runs `operation`, and again on another connection when a connection is cut under it ({@link connectionCut}), up to
 * {@link CUT_ATTEMPTS} times in all. Only for operations that are safe to repeat (a check, a migration that creates
 * what is missing). Rejects with the last error.
 */
export async function againOnCut<T>(operation: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (attempt >= CUT_ATTEMPTS || !connectionCut(error)) throw error;
      await delay(CUT_RETRY_MS * attempt);
    }
  }
}
