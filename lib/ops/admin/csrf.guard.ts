import {
  BadRequestException,
  ForbiddenException,
  Injectable,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { CSRF_FIELD, CSRF_HEADER, UniqueJobsAdminCsrf } from './csrf.service.js';
import { bodyOf, stringParam, type AdminRequest } from './http.js';

/**
 * Guards every admin mutation, after the user's guard: the request must be a POST, come from this origin (when it
 * says where it comes from) and carry the CSRF token of its cookie and identity, in the `_csrf` form field or the
 * `x-csrf-token` header. Anything else is a 403 and changes nothing.
 */
@Injectable()
export class UniqueJobsAdminCsrfGuard implements CanActivate {
  constructor(private readonly csrf: UniqueJobsAdminCsrf) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<AdminRequest>();
    if (req.method !== 'POST') throw new ForbiddenException('Mutations must be POST requests');
    if (!this.csrf.sameOrigin(req)) throw new ForbiddenException('Cross-origin request refused');
    let body: Record<string, unknown>;
    try {
      body = await bodyOf(req);
    } catch {
      throw new BadRequestException('Unreadable request body');
    }
    const headerToken = stringParam(req.headers[CSRF_HEADER]);
    const token = headerToken ?? stringParam(body[CSRF_FIELD]);
    if (!this.csrf.verify(req, token)) throw new ForbiddenException('Missing or invalid CSRF token');
    return true;
  }
}
