import type { CanActivate, DynamicModule, ForwardReference, Type } from '@nestjs/common';
import type { Queue } from 'bullmq';
import type { IdempotencyStore } from '../../../idempotency/idempotency-store.interface.js';
import type { AdminRequest } from '../http.js';

/** A queue the admin inspects: a BullMQ `Queue`, its name (BullMQ prefix `'bull'`), or its name and key prefix. */
export type AdminQueue =
  | Queue
  | string
  | {
      /** The queue's name. */
      name: string;
      /** The queue's BullMQ key prefix (its `prefix` option). Default `'bull'`. */
      prefix?: string;
    };

/** Options of `UniqueJobsAdminModule.forRoot`. */
export interface UniqueJobsAdminModuleOptions {
  /**
   * Where the page and API are mounted (after any global prefix), e.g. `'admin/unique-jobs'`: the page at
   * `/<path>`, the JSON API under `/<path>/api`. Letters, digits, `-`, `_`, `.` and `/` only.
   */
  path: string;
  /**
   * Required. Every route of the admin (page, JSON API, CSRF token) goes through this guard before anything else runs:
   * a Nest `CanActivate` class (resolved in this module, with `imports` for its dependencies) or instance. Deny with
   * `false` (403) or by throwing (`UnauthorizedException` for 401). There is deliberately no way to mount the admin
   * without one; for a trusted network, write the guard that checks that.
   */
  guard: Type<CanActivate> | CanActivate;
  /**
   * The `Host` values the admin answers, e.g. `['ops.example.com', 'localhost:3000']` (without a port: any port;
   * case-insensitive); any other `Host` gets 421 before the guard runs. Set it whenever the guard trusts where a
   * request comes from (a source address, a VPN) rather than credentials the browser only sends to your host: it is
   * what stops DNS rebinding, where a page of another site, made to resolve to your admin's address, reads the pages
   * and passes the origin check. Compared as browsers send them (canonical IPs, no trailing dot; `:80`/`:443`
   * entries are refused). Behind a proxy, the proxy must pass the client's `Host` on (nginx `proxy_set_header Host
   * $host`): one that sends its upstream address makes every request look alike. Default: every `Host`.
   */
  allowedHosts?: readonly string[];
  /** Modules the guard's class needs (its injected dependencies). */
  imports?: (Type<unknown> | DynamicModule | Promise<DynamicModule> | ForwardReference<unknown>)[];
  /**
   * The queues whose locks and jobs the admin shows. Default: every queue registered with `BullModule.registerQueue`
   * in this application (the queues the unique-jobs module guards).
   */
  queues?: readonly AdminQueue[];
  /**
   * Idempotency stores the key lookup can query, by name. Default: the stores of `UniqueJobsModule.forRoot`
   * (`idempotency.store` as `'default'`, or the Redis store on the lock connection, plus `idempotency.stores`).
   */
  idempotencyStores?: Readonly<Record<string, IdempotencyStore>>;
  /** Locks per page (1-500). Default 50. */
  pageSize?: number;
  /** CSRF protection of the mutations (always on; these options only tune it). */
  csrf?: AdminCsrfOptions;
  /** Title of the page. Default `'Unique jobs'`. */
  title?: string;
}

/** Tuning of the admin's CSRF protection (a signed double-submit cookie bound to the requester's identity). */
export interface AdminCsrfOptions {
  /**
   * HMAC secret of the tokens (at least 32 bytes). Default: random per process, so tokens do not survive a restart
   * and are not valid on another instance; behind a load balancer without sticky sessions, set the same secret on
   * every instance (from your secret store, never from source code).
   */
  secret?: string | Uint8Array;
  /**
   * Who the request is, after the guard ran: tokens are bound to it, so a token issued to one user is refused for
   * another. Default: `request.user` as a string, or its `id`, `sub`, `username` or `email`; `''` when absent.
   */
  identity?: (request: AdminRequest) => string | undefined;
  /**
   * Origins (`https://ops.example.com`) accepted in the `Origin`/`Referer` of a mutation besides the request's own
   * `Host` (e.g. behind a proxy that rewrites it).
   */
  allowedOrigins?: readonly string[];
  /** Mark the cookie `Secure`. Default: when the request came over TLS (`request.secure`). */
  secureCookie?: boolean;
}
