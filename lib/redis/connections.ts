// What a Redis connection is (a client, its server's name) and what its errors say.
import type { Cluster, Redis } from 'ioredis';

/** Error codes and messages that mean the server is out of reach (not that a command failed). */
const UNREACHABLE =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|EPIPE|Connection is closed|connect ETIMEDOUT|MaxRetriesPerRequest|Stream isn't writeable/i;

/**
 * What Redis answers a login it refuses: `WRONGPASS` (Redis 6+: a wrong password, a user that does not exist or is
 * disabled), `NOAUTH` (no password where one is required), `invalid password` (Redis 5 and older).
 */
const LOGIN_REFUSED = /\b(WRONGPASS|NOAUTH)\b|\binvalid (username-)?password\b/i;

/** Whether `error` says the server is out of reach (by its code or message). */
export function isUnreachable(error: unknown): boolean {
  return UNREACHABLE.test(`${(error as { code?: string } | undefined)?.code ?? ''} ${messageOf(error)}`);
}

/**
 * Redis' answer when `error` is a refused login (a Cluster's "Failed to refresh slots cache" carries its last node's
 * error), else `undefined`.
 */
export function loginRefusal(error: unknown): string | undefined {
  const text = messageOf(error);
  if (LOGIN_REFUSED.test(text)) return text;
  const last = (error as { lastNodeError?: unknown } | undefined)?.lastNodeError;
  return last === undefined || last === error ? undefined : loginRefusal(last);
}

function messageOf(error: unknown): string {
  return (error as { message?: unknown } | undefined)?.message === undefined
    ? String(error)
    : String((error as { message: unknown }).message);
}

/** Whether `value` is an ioredis client (a `Redis` or a `Cluster`). */
export function isClient(value: unknown): value is Redis | Cluster {
  return typeof value === 'object' && value !== null && typeof (value as { status?: unknown }).status === 'string';
}

/** `host:port` of a connection given as ioredis options or a client (`cluster host:port,…` for a Cluster). */
export function describeConnection(connection: unknown): string {
  const client = connection as { options?: object; isCluster?: boolean; startupNodes?: unknown[] } | undefined;
  if (client?.isCluster) {
    const nodes = (client.startupNodes ?? []).map((node) =>
      typeof node === 'object' && node !== null
        ? `${(node as { host?: string }).host ?? '127.0.0.1'}:${(node as { port?: number }).port ?? 6379}`
        : String(node),
    );
    return `cluster ${nodes.join(',')}`;
  }
  const options = (
    client && typeof (client as { status?: unknown }).status === 'string' ? client.options : connection
  ) as { host?: string; port?: number; path?: string; url?: unknown } | undefined;
  if (typeof options?.url === 'string') {
    try {
      const url = new URL(options.url);
      return `${url.hostname || '127.0.0.1'}:${url.port || 6379}`;
    } catch {
      return 'an unparsable url';
    }
  }
  if (options?.path) return options.path;
  return `${options?.host ?? '127.0.0.1'}:${options?.port ?? 6379}`;
}
