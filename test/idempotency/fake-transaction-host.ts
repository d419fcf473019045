// A stand-in for @nestjs-cls/transactional's TransactionHost, for in-process (jest) tests: nestjs-cls is a CommonJS
// package that requires the ES-module-only @nestjs/common, which jest's module runtime cannot load. It keeps the
// active transaction in AsyncLocalStorage as the real one keeps it in CLS, and drives the real adapter's options
// (`new TransactionalAdapterTypeOrm(...).optionsFactory(dataSource)`), so the transactions are the adapter's own. The
// real TransactionHost, @Transactional() and ClsModule run in the worker-process tests (orm-cls.spec.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import type { TransactionHostLike } from '../../lib/index.js';

/** What `optionsFactory` of a @nestjs-cls/transactional adapter returns. */
export interface AdapterOptions<Tx> {
  wrapWithTransaction(options: never, fn: () => Promise<unknown>, setTx: (tx?: Tx) => void): Promise<unknown>;
  getFallbackInstance(): Tx;
}

export class FakeTransactionHost<Tx> implements TransactionHostLike<Tx> {
  private readonly storage = new AsyncLocalStorage<{ tx?: Tx }>();

  constructor(private readonly adapter: AdapterOptions<Tx>) {}

  get tx(): Tx {
    return this.storage.getStore()?.tx ?? this.adapter.getFallbackInstance();
  }

  /** Only what the store uses: REQUIRES_NEW (a new transaction, whatever is active). */
  withTransaction<R>(propagation: string, options: unknown, fn: () => Promise<R>): Promise<R> {
    if (propagation !== 'REQUIRES_NEW') throw new Error(`FakeTransactionHost: unexpected propagation ${propagation}`);
    const context: { tx?: Tx } = {};
    return this.storage.run(context, () =>
      this.adapter.wrapWithTransaction((options ?? {}) as never, fn, (tx) => (context.tx = tx)),
    ) as Promise<R>;
  }

  withoutTransaction<R>(fn: () => Promise<R>): Promise<R> {
    return this.storage.run({}, fn);
  }
}
