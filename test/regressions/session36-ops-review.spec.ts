// Hostile review (session 36) of the operator surfaces: the admin page and JSON API, the CLI, their options and
// their input. Each case here failed before its fix.
import { describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { InvalidUniqueJobOptionsError, UniqueJobsAdminModule } from '../../lib/index.js';
import { bullOptions, uniqueName } from '../support/redis.js';

// `UniqueJobsAdminModule.forRoot` checked its top-level keys but not what was inside them: a misspelt CSRF option
// (`secureCookies`) was dropped without a word (the cookie stayed without `Secure` behind a TLS proxy), a
// `csrf.identity` that is not a function made every page a 500, `queues: [null]` failed the bootstrap with a bare
// TypeError, and a `title` object was printed as "[object Object]".
describe('session 36: admin options inside csrf, queues, idempotencyStores, imports, title', () => {
  const guard = { canActivate: () => true };

  it.each([
    ['csrf.secureCookies', { csrf: { secureCookies: true } }, /"csrf\.secureCookies" is not an option; valid: secret/],
    ['csrf as a string', { csrf: 'on' }, /"csrf" must be an object/],
    ['csrf.identity not a function', { csrf: { identity: 'user' } }, /"csrf\.identity" must be a function/],
    ['csrf.secureCookie "false"', { csrf: { secureCookie: 'false' } }, /"csrf\.secureCookie" must be true or false/],
    ['csrf.secret a number', { csrf: { secret: 12345 } }, /"csrf\.secret" must be a string or a Uint8Array/],
    ['csrf.allowedOrigins a string', { csrf: { allowedOrigins: 'https://ops.example' } }, /"csrf\.allowedOrigins"/],
    ['queues [null]', { queues: [null] }, /"queues\[0\]" must be a BullMQ Queue, a queue name/],
    ['queues [42]', { queues: ['ok', 42] }, /"queues\[1\]"/],
    ['queue name with ":"', { queues: ['a:b'] }, /"queues\[0\]".*has no ":"/],
    ['queue {name, prfix}', { queues: [{ name: 'q', prfix: 'x' }] }, /"queues\[0\]"/],
    ['idempotencyStores a string', { idempotencyStores: 'redis' }, /"idempotencyStores" must be an object/],
    ['idempotencyStores.x null', { idempotencyStores: { x: null } }, /"idempotencyStores\.x" must be an Idempotency/],
    ['imports a module', { imports: 'AuthModule' }, /"imports" must be an array/],
    ['title an object', { title: { text: 'Ops' } }, /"title" must be a string/],
  ])('%s: refused at forRoot, naming the option', (_label, bad, message) => {
    const mount = () => UniqueJobsAdminModule.forRoot({ path: 'admin', guard, ...(bad as object) });
    expect(mount).toThrow(InvalidUniqueJobOptionsError);
    expect(mount).toThrow(message);
  });

  it('valid nested options still pass', async () => {
    const queue = new Queue(uniqueName('s36q'), bullOptions());
    try {
      const store = { get: async () => undefined };
      expect(() =>
        UniqueJobsAdminModule.forRoot({
          path: 'admin',
          guard,
          csrf: {
            secret: new Uint8Array(32),
            identity: () => 'ops',
            allowedOrigins: ['https://ops.example'],
            secureCookie: true,
          },
          queues: [queue, 'payments', { name: 'emails' }, { name: 'sms', prefix: 'other' }],
          idempotencyStores: { default: store as never },
          imports: [],
          title: 'Ops',
        }),
      ).not.toThrow();
    } finally {
      await queue.close();
    }
  });
});
