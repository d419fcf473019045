import { HttpException, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { AdminRequest } from './http.js';
import type { UniqueJobsAdminModuleOptions } from './interfaces/unique-jobs-admin-options.interface.js';
import { UNIQUE_JOBS_ADMIN_OPTIONS } from './unique-jobs-admin.constants.js';

/**
 * The shape of a `Host` (and of an `allowedHosts` entry): a host name (letters, digits, `-`, `_`: Docker service names
 * have `_`) or IPv4 address, one trailing dot allowed, or a bracketed IPv6 address, with an optional port. Checked before the WHATWG URL parser canonicalises it.
 */
const HOST_SHAPE = /^(?:[\w-]+(?:\.[\w-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** A `Host` as browsers compare it: lowercase name, IPv4/IPv6 in canonical form, no trailing dot, port as a number. */
export interface CanonicalHost {
  name: string;
  /** `undefined` when the `Host` has no port (or `:80`, which a browser never sends). */
  port: number | undefined;
}

/**
 * `text` canonicalised as the URL parser does (`127.1` → `127.0.0.1`, `[0:0::1]` → `[::1]`, `:08443` → `:8443`,
 * `OPS.example.com.` → `ops.example.com`), or `undefined` when it is not a host (`[1.2.3.4]`, `999.1.1.1`, a port past
 * 65535 or 0, spaces).
 */
export function canonicalHost(text: string): CanonicalHost | undefined {
  if (!HOST_SHAPE.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(`http://${text}`);
  } catch {
    return undefined;
  }
  const name = url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname;
  const port = url.port === '' ? undefined : Number(url.port);
  return port === 0 ? undefined : { name, port };
}

/**
 * Guards every admin route, before the user's guard, when `allowedHosts` is set: the request's `Host` must be one of
 * them, else 421 Misdirected Request and nothing runs. It closes DNS rebinding: a page of `attacker.example` whose
 * name is made to resolve to the admin's address is same-origin with itself for the browser, so origin checks pass,
 * but the `Host` it sends is `attacker.example`. A request with more than one `Host` header is refused too. Without
 * the option every `Host` passes.
 */
@Injectable()
export class UniqueJobsAdminHostGuard implements CanActivate {
  /** Allowed `name:port` pairs, and names allowed on any port. */
  private readonly exact = new Set<string>();
  private readonly anyPort = new Set<string>();
  private readonly enabled: boolean;

  constructor(@Inject(UNIQUE_JOBS_ADMIN_OPTIONS) options: UniqueJobsAdminModuleOptions) {
    this.enabled = options.allowedHosts !== undefined;
    for (const entry of options.allowedHosts ?? []) {
      const host = canonicalHost(entry); // validated at bootstrap
      if (host?.port === undefined) this.anyPort.add(host?.name ?? '');
      else this.exact.add(`${host.name}:${host.port}`);
    }
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.enabled) return true;
    const req = context.switchToHttp().getRequest<AdminRequest>();
    const header = req.headers.host;
    const host = typeof header === 'string' && hostHeaders(req) === 1 ? canonicalHost(header) : undefined;
    const allowed = host && (this.anyPort.has(host.name) || this.exact.has(`${host.name}:${host.port}`));
    if (allowed && !targetDisagreesWithHost(req)) return true;
    throw new HttpException("Misdirected Request: this Host is not one of the admin's allowedHosts", 421);
  }
}

/**
 * Whether the request line names another host than the `Host` header: an absolute-form target (`GET
 * http://other.example/admin HTTP/1.1`, what a proxy receives) whose authority is not the `Host`. HTTP tells an origin
 * server to go by the target's authority then, so the admin's host and origin checks, which read `Host`, would judge
 * a request meant for another host. Origin-form targets (`/admin`, what browsers send a server) never disagree.
 */
export function targetDisagreesWithHost(req: AdminRequest): boolean {
  const target = req.url ?? '/';
  if (target.startsWith('/') || target === '*') return false;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return true;
  }
  const header = req.headers.host;
  const stated = typeof header === 'string' ? canonicalHost(header) : undefined;
  const named = canonicalHost(url.host);
  // A port left out is the scheme's default (`https://ops.example/` and `Host: ops.example:443` agree).
  const defaultPort = url.protocol === 'https:' ? 443 : 80;
  const portOf = (host: CanonicalHost) => host.port ?? defaultPort;
  return !stated || !named || stated.name !== named.name || portOf(stated) !== portOf(named);
}

/** How many `Host` headers the request carried (Node keeps the first of several in `headers`). */
function hostHeaders(req: AdminRequest): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i].toLowerCase() === 'host') count++;
  return count;
}
