import { Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { UniqueJobsEvents } from '../events/unique-jobs.events.js';
import { JobInterceptor } from './job.interceptor.js';
import { OpenTelemetryInstrumentation, type OpenTelemetryApi } from '../ops/tracing/open-telemetry.instrumentation.js';

/**
 * OpenTelemetry spans for unique jobs, on when `@opentelemetry/api` is installed (an optional peer, imported when the
 * module starts) and a tracer provider is registered before the application starts (an SDK's `start()`); otherwise
 * nothing is wrapped and nothing is paid per job. See {@link OpenTelemetryInstrumentation}
 * for the spans and their attributes (never job data, idempotency keys or job ids).
 */
@Injectable()
export class UniqueJobsTracing implements OnModuleInit, OnModuleDestroy {
  private subscription: Subscription | undefined;

  constructor(
    private readonly interceptor: JobInterceptor,
    private readonly events: UniqueJobsEvents,
  ) {}

  /**
   * Nest lifecycle hook: when `@opentelemetry/api` is installed and a tracer provider is registered, wraps the
   * library's operations in spans and adds its events to them; otherwise does nothing (no cost per job).
   */
  async onModuleInit(): Promise<void> {
    let api: OpenTelemetryApi;
    try {
      api = await import('@opentelemetry/api');
    } catch {
      return; // the optional peer is not installed: no tracing
    }
    // Without a tracer provider every span would be a no-op that still costs its bookkeeping on each job: stay out of
    // the way unless one is registered (as OpenTelemetry's SDKs do before the application starts).
    if (!hasTracerProvider(api)) return;
    const instrumentation = new OpenTelemetryInstrumentation(api);
    this.interceptor.instrument(instrumentation);
    this.subscription = this.events.events$.subscribe((event) => instrumentation.annotate(event));
  }

  /** Nest lifecycle hook: stops adding the library's events to spans. */
  onModuleDestroy(): void {
    this.subscription?.unsubscribe();
  }
}

/** Whether a real tracer provider is registered (the global proxy delegates to something other than the no-op). */
function hasTracerProvider(api: OpenTelemetryApi): boolean {
  const provider = api.trace.getTracerProvider();
  if (!(provider instanceof api.ProxyTracerProvider)) return true;
  return provider.getDelegate() !== new api.ProxyTracerProvider().getDelegate();
}
