import { Module } from '@nestjs/common';
import { UniqueJobsHealthIndicator } from './unique-jobs-health.indicator.js';

/**
 * Provides {@link UniqueJobsHealthIndicator}: import it next to `TerminusModule` in the module of your health
 * controller (with `UniqueJobsModule.forRoot` in the application).
 */
@Module({ providers: [UniqueJobsHealthIndicator], exports: [UniqueJobsHealthIndicator] })
export class UniqueJobsHealthModule {}
