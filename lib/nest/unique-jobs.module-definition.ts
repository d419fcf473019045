import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { UniqueJobsModuleOptions } from '../options/unique-jobs-module-options.interface.js';

/** `forRoot` / `forRootAsync` built with Nest's ConfigurableModuleBuilder; `isGlobal` defaults to `true`. */
export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: UNIQUE_JOBS_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<UniqueJobsModuleOptions>({ moduleName: 'UniqueJobs' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
