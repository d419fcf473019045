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
