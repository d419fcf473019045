export * from './unique-jobs.error.js';
export * from './duplicate-job.error.js';
export * from './invalid-unique-job-options.error.js';
export * from './unserializable-lock-args.error.js';
