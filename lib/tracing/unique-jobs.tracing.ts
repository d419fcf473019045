import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { JobInterceptor } from '../interceptor/job.interceptor.js';
import { OpenTelemetryInstrumentation, type OpenTelemetryApi } from './open-telemetry.instrumentation.js';

/**
 * OpenTelemetry spans for unique jobs, on whenever `@opentelemetry/api` is installed (an optional peer, imported when
 * the module starts); without a registered tracer provider the spans are no-ops. See {@link OpenTelemetryInstrumentation}
 * for the spans and their attributes (never job data, idempotency keys or job ids).
 */
@Injectable()
export class UniqueJobsTracing implements OnModuleInit, OnModuleDestroy {
  private subscription: Subscription | undefined;

  constructor(
    private readonly interceptor: JobInterceptor,
    private readonly events: UniqueJobsEvents,
  ) {}

  async onModuleInit(): Promise<void> {
    let api: OpenTelemetryApi;
    try {
      api = await import('@opentelemetry/api');
    } catch {
      return; // the optional peer is not installed: no tracing
    }
    const instrumentation = new OpenTelemetryInstrumentation(api);
    this.interceptor.instrument(instrumentation);
    this.subscription = this.events.events$.subscribe((event) => instrumentation.annotate(event));
  }

  onModuleDestroy(): void {
    this.subscription?.unsubscribe();
  }
}
