import { HttpException, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { AdminRequest } from './http.js';
import type { UniqueJobsAdminModuleOptions } from './interfaces/unique-jobs-admin-options.interface.js';
import { UNIQUE_JOBS_ADMIN_OPTIONS } from './unique-jobs-admin.constants.js';

/** An `allowedHosts` entry: a host name or IPv4 address, or a bracketed IPv6 address, with an optional port. */
export const ALLOWED_HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * Guards every admin route, before the user's guard, when `allowedHosts` is set: the request's `Host` must be one of
 * them, else 421 Misdirected Request and nothing runs. It closes DNS rebinding: a page of `attacker.example` whose
 * name is made to resolve to the admin's address is same-origin with itself for the browser, so origin checks pass,
 * but the `Host` it sends is `attacker.example`. Without the option every `Host` passes.
 */
@Injectable()
export class UniqueJobsAdminHostGuard implements CanActivate {
  /** Allowed `host:port` pairs, and host names allowed on any port. */
  private readonly exact: ReadonlySet<string>;
  private readonly anyPort: ReadonlySet<string>;
  private readonly enabled: boolean;

  constructor(@Inject(UNIQUE_JOBS_ADMIN_OPTIONS) options: UniqueJobsAdminModuleOptions) {
    const hosts = (options.allowedHosts ?? []).map((host) => splitHost(host.toLowerCase()));
    this.enabled = options.allowedHosts !== undefined;
    this.exact = new Set(hosts.filter((host) => host.port !== undefined).map((host) => `${host.name}:${host.port}`));
    this.anyPort = new Set(hosts.filter((host) => host.port === undefined).map((host) => host.name));
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.enabled) return true;
    const header = context.switchToHttp().getRequest<AdminRequest>().headers.host;
    const host = typeof header === 'string' && ALLOWED_HOST.test(header) ? splitHost(header.toLowerCase()) : undefined;
    if (host && (this.anyPort.has(host.name) || this.exact.has(`${host.name}:${host.port}`))) return true;
    throw new HttpException("Misdirected Request: this Host is not one of the admin's allowedHosts", 421);
  }
}

/** `name[:port]` or `[v6][:port]` (already checked against {@link ALLOWED_HOST}) → its name and port. */
function splitHost(host: string): { name: string; port: string | undefined } {
  const colon = host.lastIndexOf(':');
  if (colon < 0 || host.endsWith(']')) return { name: host, port: undefined };
  return { name: host.slice(0, colon), port: host.slice(colon + 1) };
}
