/**
 * Base class of every error this library throws, so callers can catch them all with one `instanceof`.
 */
export class UniqueJobsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
