import { Module, type DynamicModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { InvalidUniqueJobOptionsError } from '../../errors/invalid-unique-job-options.error.js';
import { withoutTrailingSlashes } from '../../common/slashes.js';
import { UniqueJobsAdminCsrfGuard } from './csrf.guard.js';
import { UniqueJobsAdminCsrf } from './csrf.service.js';
import { canonicalHost, UniqueJobsAdminHostGuard } from './host.guard.js';
import type { UniqueJobsAdminModuleOptions } from './interfaces/unique-jobs-admin-options.interface.js';
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
  const secret = options.csrf?.secret;
  if (secret !== undefined && Buffer.byteLength(typeof secret === 'string' ? secret : Buffer.from(secret)) < 32) {
    fail('csrf.secret', 'must be at least 32 bytes (use a random secret from your secret store)');
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
  if (options.queues !== undefined && !Array.isArray(options.queues)) fail('queues', 'must be an array');
  return path;
}
