import {
  Injectable,
  ServiceUnavailableException,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { throwError, timeout, type Observable } from 'rxjs';

/** Longest an admin request waits for Redis (ms) before it is answered 503. */
export const ADMIN_DEADLINE_MS = 10_000;

/**
 * Answers an admin request 503 when it has not finished within {@link ADMIN_DEADLINE_MS}. The application's Redis
 * connection queues commands while Redis is down (BullMQ needs `maxRetriesPerRequest: null`), so without a deadline a
 * page or API call made during an outage waits for as long as the outage lasts, and every refresh adds another. A
 * mutation cut off this way may still be made when Redis answers again: the answer says so.
 */
@Injectable()
export class UniqueJobsAdminDeadline implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const method = context.switchToHttp().getRequest<{ method?: string }>().method;
    const change = method === 'POST' ? ' The change asked for may still be made when Redis answers again.' : '';
    return next.handle().pipe(
      timeout({
        first: ADMIN_DEADLINE_MS,
        with: () =>
          throwError(
            () =>
              new ServiceUnavailableException(
                `No answer within ${ADMIN_DEADLINE_MS / 1000} s from Redis (or the idempotency store a key lookup reads): is it down or overloaded?${change}`,
              ),
          ),
      }),
    );
  }
}
