import {
  BadRequestException,
  Controller,
  Get,
  HttpException,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseFilters,
  UseGuards,
  UseInterceptors,
  type CanActivate,
  type Type,
} from '@nestjs/common';
import { parseLockDigest } from '../inspection/digest-format.js';
import { CSRF_HEADER, UniqueJobsAdminCsrf } from './csrf.service.js';
import { UniqueJobsAdminCsrfGuard } from './csrf.guard.js';
import { UniqueJobsAdminDeadline } from './deadline.interceptor.js';
import { UniqueJobsAdminHostGuard } from './host.guard.js';
import {
  bodyOf,
  mountPath,
  newNonce,
  redirect,
  securityHeaders,
  send,
  sendJson,
  stringParam,
  type AdminRequest,
  type AdminResponse,
} from './http.js';
import type { UniqueJobsAdminModuleOptions } from './interfaces/unique-jobs-admin-options.interface.js';
import { AdminQuery, entryIdOf, kindOf, noticeOf, offsetOf, type QueryParams } from './admin-query.js';
import { UniqueJobsAdminExceptionFilter } from './unique-jobs-admin.exception-filter.js';
import { UNIQUE_JOBS_ADMIN_OPTIONS } from './unique-jobs-admin.constants.js';
import { UniqueJobsAdminService } from './unique-jobs-admin.service.js';
import { deadSetPage } from './views/dead-set.view.js';
import type { SafeHtml } from './views/html.js';
import { adminUrl } from './views/html.js';
import { keysPage, type KeyQuery } from './views/keys.view.js';
import type { PageContext } from './views/layout.view.js';
import { lockPage } from './views/lock.view.js';
import { locksPage, type LocksQuery } from './views/locks.view.js';

/**
 * The admin page and JSON API. Mounted by `UniqueJobsAdminModule.forRoot`, which subclasses it with the configured
 * path and guard (see {@link createAdminController}). GET routes only read; every mutation is a POST behind the CSRF
 * guard (a GET on a mutation's URL answers 405).
 */
export class UniqueJobsAdminController {
  private readonly title: string;
  private readonly query: AdminQuery;

  constructor(
    private readonly admin: UniqueJobsAdminService,
    private readonly csrf: UniqueJobsAdminCsrf,
    @Inject(UNIQUE_JOBS_ADMIN_OPTIONS) options: UniqueJobsAdminModuleOptions,
  ) {
    this.title = options.title ?? 'Unique jobs';
    this.query = new AdminQuery(admin, options.pageSize ?? 50);
  }

  // ───────────────────────────── page ─────────────────────────────

  @Get()
  async locksPage(@Req() req: AdminRequest, @Res() res: AdminResponse, @Query() query: QueryParams): Promise<void> {
    const context = this.pageContext(req, res, 0);
    const locksQuery: LocksQuery = {
      digest: stringParam(query.digest)?.trim(),
      pattern: stringParam(query.pattern)?.trim(),
      kind: stringParam(query.kind),
      queue: stringParam(query.queue),
      jobId: stringParam(query.jobId)?.trim(),
      cursor: stringParam(query.cursor),
      limit: this.query.limitOf(query.limit),
    };
    const [counts, page] = await Promise.all([
      this.admin.counts(),
      this.admin.listLocks(this.query.lockFilter(query), this.query.cursorOf(query.cursor), locksQuery.limit),
    ]);
    this.sendPage(res, context, locksPage(context, counts, page, locksQuery, this.admin.queueNames(), noticeOf(query)));
  }

  @Get('locks/:digest')
  async lockPage(
    @Req() req: AdminRequest,
    @Res() res: AdminResponse,
    @Param('digest') digest: string,
    @Query() query: QueryParams,
  ): Promise<void> {
    const context = this.pageContext(req, res, 2);
    const detail = await this.admin.showLock(parseLockDigest(digest));
    this.sendPage(res, context, lockPage(context, detail, noticeOf(query)));
  }

  @Post('locks/:digest/release')
  @UseGuards(UniqueJobsAdminCsrfGuard)
  async releaseFromPage(
    @Req() req: AdminRequest,
    @Res() res: AdminResponse,
    @Param('digest') digestParam: string,
  ): Promise<void> {
    const digest = parseLockDigest(digestParam);
    const body = await bodyOf(req);
    const released = await this.admin.releaseLock(digest, kindOf(body.kind));
    const base = mountPath(req, 3);
    const params = { notice: 'released', n: released, lock: digest };
    redirect(
      res,
      stringParam(body.from) === 'detail' ? adminUrl(base, ['locks', digest], params) : adminUrl(base, [], params),
    );
  }

  @Get('dead')
  async deadSetPage(@Req() req: AdminRequest, @Res() res: AdminResponse, @Query() query: QueryParams): Promise<void> {
    const context = this.pageContext(req, res, 1);
    const [counts, page] = await Promise.all([
      this.admin.counts(),
      this.admin.deadSet(offsetOf(query.offset), this.query.limitOf(query.limit)),
    ]);
    this.sendPage(res, context, deadSetPage(context, counts, page, noticeOf(query)));
  }

  @Post('dead/:id/retry')
  @UseGuards(UniqueJobsAdminCsrfGuard)
  async retryFromPage(@Req() req: AdminRequest, @Res() res: AdminResponse, @Param('id') id: string): Promise<void> {
    const result = await this.admin.retryDead(entryIdOf(id));
    const params = result ? { notice: 'retried', status: result.status } : { notice: 'missing-entry' };
    redirect(res, adminUrl(mountPath(req, 3), ['dead'], params));
  }

  @Post('dead/:id/delete')
  @UseGuards(UniqueJobsAdminCsrfGuard)
  async deleteFromPage(@Req() req: AdminRequest, @Res() res: AdminResponse, @Param('id') id: string): Promise<void> {
    const deleted = await this.admin.deleteDead(entryIdOf(id));
    redirect(res, adminUrl(mountPath(req, 3), ['dead'], { notice: deleted ? 'deleted' : 'missing-entry' }));
  }

  @Get('keys')
  async keysPage(@Req() req: AdminRequest, @Res() res: AdminResponse, @Query() query: QueryParams): Promise<void> {
    const context = this.pageContext(req, res, 1);
    const stores = this.admin.storeNames();
    const keyQuery: KeyQuery = {
      store: stringParam(query.store) ?? stores[0],
      scope: stringParam(query.scope),
      key: stringParam(query.key),
    };
    const lookup = keyQuery.scope && keyQuery.key ? await this.query.lookup(keyQuery) : undefined;
    this.sendPage(res, context, keysPage(context, stores, keyQuery, lookup));
  }

  // ───────────────────────────── JSON API ─────────────────────────────

  @Get('api/csrf')
  csrfToken(@Req() req: AdminRequest, @Res() res: AdminResponse): void {
    const token = this.csrf.issue(req, res, mountPath(req, 2));
    sendJson(res, 200, { token, header: CSRF_HEADER });
  }

  @Get('api/counts')
  async countsApi(@Res() res: AdminResponse): Promise<void> {
    sendJson(res, 200, await this.admin.counts());
  }

  @Get('api/locks')
  async locksApi(@Res() res: AdminResponse, @Query() query: QueryParams): Promise<void> {
    sendJson(
      res,
      200,
      await this.admin.listLocks(
        this.query.lockFilter(query),
        this.query.cursorOf(query.cursor),
        this.query.limitOf(query.limit),
      ),
    );
  }

  @Get('api/locks/:digest')
  async lockApi(
    @Res() res: AdminResponse,
    @Param('digest') digest: string,
    @Query() query: QueryParams,
  ): Promise<void> {
    const detail = await this.admin.showLock(parseLockDigest(digest), this.query.rejectedLimitOf(query.limit));
    if (detail.locks.length === 0 && detail.rejectedTotal === 0) {
      throw new NotFoundException(`No lock and no rejected duplicate with digest ${detail.digest}`);
    }
    sendJson(res, 200, detail);
  }

  @Post('api/locks/:digest/release')
  @UseGuards(UniqueJobsAdminCsrfGuard)
  async releaseApi(
    @Req() req: AdminRequest,
    @Res() res: AdminResponse,
    @Param('digest') digestParam: string,
    @Query() query: QueryParams,
  ): Promise<void> {
    const digest = parseLockDigest(digestParam);
    const body = await bodyOf(req);
    const released = await this.admin.releaseLock(digest, kindOf(body.kind ?? query.kind));
    sendJson(res, 200, { digest, released });
  }

  @Get('api/dead')
  async deadSetApi(@Res() res: AdminResponse, @Query() query: QueryParams): Promise<void> {
    sendJson(res, 200, await this.admin.deadSet(offsetOf(query.offset), this.query.limitOf(query.limit)));
  }

  @Post('api/dead/:id/retry')
  @UseGuards(UniqueJobsAdminCsrfGuard)
  async retryApi(@Res() res: AdminResponse, @Param('id') id: string): Promise<void> {
    const result = await this.admin.retryDead(entryIdOf(id));
    if (!result) throw new NotFoundException(`No rejected duplicate with id ${id}`);
    sendJson(res, 200, { id, result });
  }

  @Post('api/dead/:id/delete')
  @UseGuards(UniqueJobsAdminCsrfGuard)
  async deleteApi(@Res() res: AdminResponse, @Param('id') id: string): Promise<void> {
    if (!(await this.admin.deleteDead(entryIdOf(id)))) {
      throw new NotFoundException(`No rejected duplicate with id ${id}`);
    }
    sendJson(res, 200, { id, deleted: true });
  }

  @Get('api/keys')
  async keysApi(@Res() res: AdminResponse, @Query() query: QueryParams): Promise<void> {
    const scope = stringParam(query.scope);
    const key = stringParam(query.key);
    if (!scope || !key) throw new BadRequestException('Query parameters "scope" and "key" are required');
    sendJson(
      res,
      200,
      await this.query.lookup({ store: stringParam(query.store) ?? this.admin.storeNames()[0], scope, key }),
    );
  }

  /** GET (and HEAD) on a mutation's URL: refused, nothing changes. */
  @Get([
    'locks/:digest/release',
    'dead/:id/retry',
    'dead/:id/delete',
    'api/locks/:digest/release',
    'api/dead/:id/retry',
    'api/dead/:id/delete',
  ])
  methodNotAllowed(@Res() res: AdminResponse): void {
    res.setHeader('Allow', 'POST');
    throw new HttpException('Method Not Allowed: this action needs a POST with a CSRF token', 405);
  }

  // ───────────────────────────── helpers ─────────────────────────────

  private pageContext(req: AdminRequest, res: AdminResponse, depth: number): PageContext {
    const base = mountPath(req, depth);
    return { base, title: this.title, nonce: newNonce(), csrfToken: this.csrf.issue(req, res, base) };
  }

  private sendPage(res: AdminResponse, context: PageContext, page: SafeHtml): void {
    send(res, 200, 'text/html; charset=utf-8', page.toString(), securityHeaders(context.nonce));
  }
}

/**
 * The controller class of one `forRoot`: {@link UniqueJobsAdminController} at `path`, every route behind the host check
 * (`allowedHosts`) and `guard` (then, for mutations, the CSRF guard), answered 503 past a deadline while Redis does not
 * answer, errors rendered by the admin's exception filter.
 */
export function createAdminController(path: string, guard: Type<CanActivate> | CanActivate): Type<unknown> {
  @Controller(path)
  @UseGuards(UniqueJobsAdminHostGuard, guard)
  @UseFilters(UniqueJobsAdminExceptionFilter)
  @UseInterceptors(UniqueJobsAdminDeadline)
  class MountedUniqueJobsAdminController extends UniqueJobsAdminController {}
  return MountedUniqueJobsAdminController;
}
