import { Module, type DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Queue } from 'bullmq';
import { InvalidUniqueJobOptionsError } from '../../errors/invalid-unique-job-options.error.js';
import { describeOptionValue, isPlainObject, shortened } from '../../common/option-values.js';
import { withoutTrailingSlashes } from '../../common/slashes.js';
import { UniqueJobsAdminCsrfGuard } from './csrf.guard.js';
import { UniqueJobsAdminCsrf } from './csrf.service.js';
import { UniqueJobsAdminDeadline } from './deadline.interceptor.js';
import { canonicalHost, UniqueJobsAdminHostGuard } from './host.guard.js';
import type {
  AdminCsrfOptions,
  UniqueJobsAdminModuleOptions,
} from './interfaces/unique-jobs-admin-options.interface.js';
import { UNIQUE_JOBS_ADMIN_OPTIONS } from './unique-jobs-admin.constants.js';
import { createAdminController } from './unique-jobs-admin.controller.js';
import { UniqueJobsAdminService } from './unique-jobs-admin.service.js';

const SOURCE = 'UniqueJobsAdminModule.forRoot';
const OPTION_KEYS: readonly string[] = [
  'path',
  'guard',
  'allowedHosts',
  'imports',
  'queues',
  'idempotencyStores',
  'pageSize',
  'csrf',
  'title',
] satisfies (keyof UniqueJobsAdminModuleOptions)[];
const CSRF_KEYS: readonly string[] = [
  'secret',
  'identity',
  'allowedOrigins',
  'secureCookie',
] satisfies (keyof AdminCsrfOptions)[];
/** A BullMQ queue name as BullMQ takes it: not empty, no `:` (it separates the parts of BullMQ's keys). */
const QUEUE_NAME = /^[^:]+$/;

/**
 * The admin page and JSON API of the unique-jobs library, opt-in: import `UniqueJobsAdminModule.forRoot({ path,
 * guard })` next to `UniqueJobsModule.forRoot(...)` in an application served by `@nestjs/platform-express`. Every
 * route goes through your guard; mutations are POSTs with a CSRF token; every value on the page is escaped. See
 * docs/operations.md ("Admin page").
 */
@Module({})
export class UniqueJobsAdminModule {
  /**
   * Mounts the admin at `options.path` behind `options.guard`.
   *
   * @throws InvalidUniqueJobOptionsError when the guard is missing or an option is invalid (at bootstrap).
   */
  static forRoot(options: UniqueJobsAdminModuleOptions): DynamicModule {
    const path = validateAdminOptions(options);
    return {
      module: UniqueJobsAdminModule,
      imports: [DiscoveryModule, ...(options.imports ?? [])],
      controllers: [createAdminController(path, options.guard)],
      providers: [
        { provide: UNIQUE_JOBS_ADMIN_OPTIONS, useValue: options },
        UniqueJobsAdminService,
        UniqueJobsAdminCsrf,
        UniqueJobsAdminCsrfGuard,
        UniqueJobsAdminHostGuard,
        UniqueJobsAdminDeadline,
      ],
      exports: [UniqueJobsAdminService],
    };
  }
}

/** Checks the options; returns the path without surrounding slashes. */
function validateAdminOptions(options: UniqueJobsAdminModuleOptions | undefined): string {
  const fail = (option: string, problem: string): never => {
    throw new InvalidUniqueJobOptionsError(SOURCE, option, problem);
  };
  if (typeof options !== 'object' || options === null) return fail('options', 'must be an object with path and guard');
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.includes(key)) fail(key, `is not an option; valid options: ${OPTION_KEYS.join(', ')}`);
  }
  const guard: unknown = options.guard;
  const isGuardClass = typeof guard === 'function';
  const isGuardInstance =
    typeof guard === 'object' &&
    guard !== null &&
    typeof (guard as { canActivate?: unknown }).canActivate === 'function';
  if (!isGuardClass && !isGuardInstance) {
    fail(
      'guard',
      'is required: a Nest CanActivate class or instance that authenticates and authorizes every admin request (the admin can release locks and re-enqueue jobs; it is never mounted unguarded)',
    );
  }
  if (typeof options.path !== 'string') fail('path', "is required: where to mount the admin, e.g. 'admin/unique-jobs'");
  const path = withoutTrailingSlashes(options.path).replace(/^\/+/, '');
  if (path === '' || !/^[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/.test(path) || path.split('/').includes('..')) {
    fail(
      'path',
      `must be a non-empty URL path of letters, digits, - _ . ~ and / (got ${JSON.stringify(options.path)})`,
    );
  }
  if (
    options.pageSize !== undefined &&
    (!Number.isSafeInteger(options.pageSize) || options.pageSize < 1 || options.pageSize > 500)
  ) {
    fail('pageSize', 'must be an integer from 1 to 500');
  }
  validateCsrfOptions(options.csrf, fail);
  const secret = options.csrf?.secret;
  if (secret !== undefined && Buffer.byteLength(typeof secret === 'string' ? secret : Buffer.from(secret)) < 32) {
    fail('csrf.secret', 'must be at least 32 bytes (use a random secret from your secret store)');
  }
  const origins: unknown = options.csrf?.allowedOrigins;
  if (origins !== undefined && !Array.isArray(origins)) {
    fail('csrf.allowedOrigins', `must be an array of origins (got ${describeOptionValue(origins)})`);
  }
  for (const origin of options.csrf?.allowedOrigins ?? []) {
    let valid = false;
    try {
      valid = ['http:', 'https:'].includes(new URL(origin).protocol);
    } catch {
      valid = false;
    }
    if (!valid) fail('csrf.allowedOrigins', `must be http(s) origins like https://ops.example.com (got ${origin})`);
  }
  if (options.allowedHosts !== undefined) {
    const hosts: unknown = options.allowedHosts;
    if (!Array.isArray(hosts) || hosts.length === 0) {
      fail('allowedHosts', "must be a non-empty array of host names, e.g. ['ops.example.com', 'localhost:3000']");
    }
    for (const entry of hosts as unknown[]) {
      const host = typeof entry === 'string' ? canonicalHost(entry) : undefined;
      if (host === undefined || /:0*(80|443)$/.test(String(entry))) {
        fail(
          'allowedHosts',
          `entries must be a host name, IPv4 address or [IPv6] address with an optional port 1-65535 other than 80 and 443 (browsers leave the default port out of Host: list the name alone), like 'ops.example.com' or 'localhost:3000' (got ${JSON.stringify(entry)})`,
        );
      }
    }
  }
  validateQueues(options.queues, fail);
  if (options.imports !== undefined && !Array.isArray(options.imports)) {
    fail('imports', `must be an array of modules (got ${describeOptionValue(options.imports)})`);
  }
  const stores: unknown = options.idempotencyStores;
  if (stores !== undefined) {
    if (!isPlainObject(stores)) {
      fail('idempotencyStores', `must be an object of stores by name (got ${describeOptionValue(stores)})`);
    }
    for (const [name, store] of Object.entries(stores as Record<string, unknown>)) {
      // The admin only reads records (`get`).
      if (typeof (store as { get?: unknown } | null | undefined)?.get !== 'function') {
        fail(`idempotencyStores.${shortened(name)}`, `must be an IdempotencyStore (got ${describeOptionValue(store)})`);
      }
    }
  }
  if (options.title !== undefined && typeof options.title !== 'string') {
    fail('title', `must be a string (got ${describeOptionValue(options.title)})`);
  }
  return path;
}

/**
 * `csrf`: an object of known options only. A misspelt one (`secureCookies`) would otherwise be dropped without a word
 * and the protection it was meant to tune left at its default.
 */
function validateCsrfOptions(csrf: unknown, fail: (option: string, problem: string) => never): void {
  if (csrf === undefined) return;
  if (!isPlainObject(csrf)) {
    fail('csrf', `must be an object with ${CSRF_KEYS.join(', ')} (got ${describeOptionValue(csrf)})`);
  }
  const options = csrf;
  for (const key of Object.keys(options)) {
    if (!CSRF_KEYS.includes(key)) fail(`csrf.${shortened(key)}`, `is not an option; valid: ${CSRF_KEYS.join(', ')}`);
  }
  const { secret, identity, secureCookie } = options;
  if (secret !== undefined && typeof secret !== 'string' && !(secret instanceof Uint8Array)) {
    fail('csrf.secret', `must be a string or a Uint8Array of at least 32 bytes (got ${describeOptionValue(secret)})`);
  }
  if (identity !== undefined && typeof identity !== 'function') {
    fail(
      'csrf.identity',
      `must be a function of the request answering who it is (got ${describeOptionValue(identity)})`,
    );
  }
  if (secureCookie !== undefined && typeof secureCookie !== 'boolean') {
    fail('csrf.secureCookie', `must be true or false (got ${describeOptionValue(secureCookie)})`);
  }
}

/** `queues`: BullMQ queues, queue names, or `{ name, prefix }`, checked here rather than when the admin opens them. */
function validateQueues(queues: unknown, fail: (option: string, problem: string) => never): void {
  if (queues === undefined) return;
  if (!Array.isArray(queues)) fail('queues', `must be an array (got ${describeOptionValue(queues)})`);
  (queues as unknown[]).forEach((entry, i) => {
    if (entry instanceof Queue) return;
    const named = isPlainObject(entry) ? entry : { name: entry };
    const extra = Object.keys(named).filter((key) => key !== 'name' && key !== 'prefix');
    const valid =
      typeof named.name === 'string' &&
      QUEUE_NAME.test(named.name) &&
      (named.prefix === undefined || (typeof named.prefix === 'string' && named.prefix !== '')) &&
      extra.length === 0;
    if (!valid) {
      fail(
        `queues[${i}]`,
        `must be a BullMQ Queue, a queue name, or { name, prefix? } (a name is not empty and has no ":") (got ${describeOptionValue(entry)})`,
      );
    }
  });
}
