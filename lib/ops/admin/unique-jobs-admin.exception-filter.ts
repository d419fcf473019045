import { Catch, HttpException, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { UniqueJobsError } from '../../errors/unique-jobs.error.js';
import { InvalidCursorError } from '../inspection/errors/invalid-cursor.error.js';
import { InvalidDigestError } from '../inspection/errors/invalid-digest.error.js';
import { newNonce, securityHeaders, send, sendJson, type AdminRequest, type AdminResponse } from './http.js';
import { errorPage } from './views/error.view.js';
import { asError } from '../../errors/thrown.js';

/**
 * Renders every error of the admin routes (the guards' refusals included): an escaped HTML page for a browser
 * (`Accept: text/html`), JSON `{ statusCode, message }` otherwise. Bad input (a digest, a cursor) is a 400, a library
 * refusal (e.g. retrying an entry whose queue this application does not have) a 409; anything unexpected is logged
 * and answered with a bare 500 (no internals in the response).
 */
@Catch()
export class UniqueJobsAdminExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('UniqueJobsAdmin');

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const req = http.getRequest<AdminRequest>();
    const res = http.getResponse<AdminResponse>();
    const { status, message } = this.describe(exception);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const accept = String(req.headers.accept ?? '');
    if (accept.includes('text/html')) {
      const nonce = newNonce();
      send(
        res,
        status,
        'text/html; charset=utf-8',
        errorPage(status, message, nonce).toString(),
        securityHeaders(nonce),
      );
    } else {
      sendJson(res, status, { statusCode: status, message });
    }
  }

  private describe(exception: unknown): { status: number; message: string } {
    if (exception instanceof HttpException) {
      const response = exception.getResponse();
      const raw =
        typeof response === 'object' && response !== null ? (response as { message?: unknown }).message : response;
      const message = Array.isArray(raw) ? raw.join('; ') : typeof raw === 'string' ? raw : exception.message;
      return { status: exception.getStatus(), message };
    }
    if (exception instanceof InvalidDigestError || exception instanceof InvalidCursorError) {
      return { status: 400, message: exception.message };
    }
    if (exception instanceof UniqueJobsError) return { status: 409, message: exception.message };
    this.logger.error(
      `Admin request failed: ${exception instanceof Error ? (exception.stack ?? exception.message) : asError(exception).message}`,
    );
    return { status: 500, message: 'Internal error (logged on the server)' };
  }
}
