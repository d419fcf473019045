import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type {
  AdminCsrfOptions,
  UniqueJobsAdminModuleOptions,
} from './interfaces/unique-jobs-admin-options.interface.js';
import { targetDisagreesWithHost } from './host.guard.js';
import { parseCookies, type AdminRequest, type AdminResponse } from './http.js';
import { UNIQUE_JOBS_ADMIN_OPTIONS } from './unique-jobs-admin.constants.js';

/** Name of the cookie holding the CSRF nonce. */
export const CSRF_COOKIE = 'ujadmin_csrf';

/** Name of the form field carrying the CSRF token. */
export const CSRF_FIELD = '_csrf';

/** Name of the header carrying the CSRF token (JSON API). */
export const CSRF_HEADER = 'x-csrf-token';

const NONCE = /^[A-Za-z0-9_-]{43}$/;

/**
 * CSRF protection of the admin's mutations: a signed double-submit cookie. The browser holds a random nonce in an
 * `HttpOnly`, `SameSite=Strict` cookie scoped to the admin's path; the token a form or API client submits is
 * `HMAC(secret, nonce, identity)`, where identity is who the guard let in. A cross-site page can neither read the token
 * nor forge one (it lacks the secret), a cookie planted by a sibling subdomain is useless without its token, and a
 * token issued to one user is refused for another. Tokens are compared in constant time.
 */
@Injectable()
export class UniqueJobsAdminCsrf {
  private readonly secret: Buffer;
  private readonly identity: (request: AdminRequest) => string | undefined;
  private readonly secureCookie: boolean | undefined;
  private readonly allowedOrigins: ReadonlySet<string>;

  constructor(@Inject(UNIQUE_JOBS_ADMIN_OPTIONS) options: UniqueJobsAdminModuleOptions) {
    const csrf: AdminCsrfOptions = options.csrf ?? {};
    this.secret = csrf.secret === undefined ? randomBytes(32) : Buffer.from(csrf.secret);
    this.identity = csrf.identity ?? defaultIdentity;
    this.secureCookie = csrf.secureCookie;
    this.allowedOrigins = new Set((csrf.allowedOrigins ?? []).map((origin) => new URL(origin).origin));
  }

  /**
   * The token for this request's forms, setting the nonce cookie (path `cookiePath`) when the request has none.
   */
  issue(req: AdminRequest, res: AdminResponse, cookiePath: string): string {
    let nonce = parseCookies(req.headers.cookie).get(CSRF_COOKIE);
    if (nonce === undefined || !NONCE.test(nonce)) {
      nonce = randomBytes(32).toString('base64url');
      const secure = this.secureCookie ?? req.secure === true;
      // Added to the cookies already set on this response (a guard refreshing its session), never in their place.
      const earlier = res.getHeader('Set-Cookie');
      res.setHeader('Set-Cookie', [
        ...(earlier === undefined ? [] : Array.isArray(earlier) ? earlier : [String(earlier)]),
        `${CSRF_COOKIE}=${nonce}; Path=${cookiePath}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`,
      ]);
    }
    return this.sign(nonce, req);
  }

  /** Whether `token` is the token of this request's nonce cookie and identity (constant-time comparison). */
  verify(req: AdminRequest, token: string | undefined): boolean {
    const nonce = parseCookies(req.headers.cookie).get(CSRF_COOKIE);
    if (nonce === undefined || !NONCE.test(nonce) || typeof token !== 'string') return false;
    const expected = Buffer.from(this.sign(nonce, req));
    const given = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /**
   * Whether the request's `Origin` (or, without one, its `Referer`) is this server or an allowed origin. A request
   * carrying neither passes (non-browser clients); the token is checked anyway. `Origin: null` is refused, and so is a
   * request whose absolute-form target names another host than its `Host` (the host this check compares with).
   */
  sameOrigin(req: AdminRequest): boolean {
    const origin = header(req, 'origin');
    const referer = header(req, 'referer');
    const claimed = origin ?? referer;
    if (targetDisagreesWithHost(req)) return false;
    if (claimed === undefined) return true;
    let url: URL;
    try {
      url = new URL(claimed);
    } catch {
      return false;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    return url.host === header(req, 'host') || this.allowedOrigins.has(url.origin);
  }

  private sign(nonce: string, req: AdminRequest): string {
    return createHmac('sha256', this.secret)
      .update(`unique-jobs-admin\0${nonce}\0${this.identity(req) ?? ''}`)
      .digest('base64url');
  }
}

function header(req: AdminRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** `request.user` as a string, or its `id`, `sub`, `username` or `email`. */
function defaultIdentity(req: AdminRequest): string {
  const user = req.user;
  if (typeof user === 'string' || typeof user === 'number') return String(user);
  if (typeof user !== 'object' || user === null) return '';
  const fields = user as Record<string, unknown>;
  for (const field of ['id', 'sub', 'username', 'email']) {
    const value = fields[field];
    if (typeof value === 'string' || typeof value === 'number') return `${field}:${value}`;
  }
  return '';
}
