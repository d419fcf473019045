import { UniqueJobsError } from './unique-jobs.error.js';

/**
 * Redis refused the login of the library's own connection (the `connection` option of `UniqueJobsModule.forRoot`, by
 * default BullModule.forRoot's): `WRONGPASS` (a wrong password, or a user that does not exist or is disabled) or
 * `NOAUTH` (no password where one is required). A wrong configuration, not an outage: thrown at bootstrap (the
 * application does not start), and by an enqueue of a unique job while Redis keeps refusing it (nothing was sent).
 */
export class RedisLoginRefusedError extends UniqueJobsError {
  constructor(
    /** The connection, as `host:port` (or the cluster's nodes). */
    readonly connection: string,
    /** The user it logs in as (`default` when it gives no username). */
    readonly user: string,
    /** Redis' answer, e.g. `WRONGPASS invalid username-password pair or user is disabled.` */
    readonly reply: string,
    /** The option that configures the connection, as the message names it. */
    readonly option: string,
    /** What follows from it (the bootstrap fails, the enqueue sent nothing). */
    consequence: string,
  ) {
    super(
      `Redis ${connection} refused the login of the library's connection (${option}) as user "${user}": ${reply} ${consequence}`,
    );
  }
}
