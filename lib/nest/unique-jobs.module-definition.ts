import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { UniqueJobsModuleOptions } from '../options/unique-jobs-module-options.interface.js';

/** `forRoot` / `forRootAsync` built with Nest's ConfigurableModuleBuilder; `isGlobal` defaults to `true`. */
const built = new ConfigurableModuleBuilder<UniqueJobsModuleOptions>({ moduleName: 'UniqueJobs' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

export const { ConfigurableModuleClass, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } = built;

/**
 * The injection token of the options given to `UniqueJobsModule.forRoot` (or made by `forRootAsync`'s factory):
 * `@Inject(UNIQUE_JOBS_MODULE_OPTIONS) options: UniqueJobsModuleOptions` reads them in a provider of your own.
 */
export const UNIQUE_JOBS_MODULE_OPTIONS = built.MODULE_OPTIONS_TOKEN;
