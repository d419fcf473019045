/** Injection token of the admin module's options. */
export const UNIQUE_JOBS_ADMIN_OPTIONS = Symbol('UNIQUE_JOBS_ADMIN_OPTIONS');
