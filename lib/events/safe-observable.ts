import { Observable, Subscriber, type Observer, type Operator, type Subscription } from 'rxjs';

/** Receives what a listener threw (or rejected with). Must not throw. */
export type ListenerErrorReporter = (error: unknown) => void;

/**
 * An Observable whose subscribers cannot hurt the code that publishes to it, nor each other: what a subscriber's
 * `next`, `error` or `complete` throws, and the rejection of a promise it returns (an `async` subscriber), goes to
 * `report` instead of rxjs's unhandled-error path (by default an exception thrown at process level, which crashes a
 * Node process). An error reaching a subscriber that has no `error` callback (e.g. thrown by a `filter` or `map` in its
 * pipe) is reported the same way. Piping keeps the protection: every operator's result is a SafeObservable too.
 */
export class SafeObservable<T> extends Observable<T> {
  constructor(
    private readonly report: ListenerErrorReporter,
    subscribe?: (this: Observable<T>, subscriber: Subscriber<T>) => (() => void) | Subscription | void,
  ) {
    super(subscribe);
  }

  /** rxjs builds every piped Observable through `lift`: the result stays safe. */
  override lift<R>(operator?: Operator<T, R>): Observable<R> {
    const observable = new SafeObservable<R>(this.report);
    // rxjs's own way of chaining an operator (what `Observable#lift` does).
    observable.source = this;
    observable.operator = operator;
    return observable;
  }

  override subscribe(observerOrNext?: Partial<Observer<T>> | ((value: T) => void)): Subscription;
  /** @deprecated rxjs's positional callbacks; pass an observer. */
  override subscribe(
    next?: ((value: T) => void) | null,
    error?: ((error: unknown) => void) | null,
    complete?: (() => void) | null,
  ): Subscription;
  override subscribe(
    observerOrNext?: Partial<Observer<T>> | ((value: T) => void) | null,
    error?: ((error: unknown) => void) | null,
    complete?: (() => void) | null,
  ): Subscription {
    // A Subscriber is rxjs's own plumbing (an operator subscribing upstream, firstValueFrom): it handles its errors.
    if (observerOrNext instanceof Subscriber) return super.subscribe(observerOrNext as Subscriber<T>);
    const observer: Partial<Observer<T>> =
      typeof observerOrNext === 'function'
        ? { next: observerOrNext, ...(error ? { error } : {}), ...(complete ? { complete } : {}) }
        : (observerOrNext ?? {});
    return super.subscribe(guarded(observer, this.report));
  }
}

/** The observer with each callback run through {@link runGuarded}; an error without an `error` callback is reported. */
function guarded<T>(observer: Partial<Observer<T>>, report: ListenerErrorReporter): Observer<T> {
  return {
    next: (value) => {
      if (observer.next) runGuarded(() => observer.next!.call(observer, value), report);
    },
    error: (error: unknown) => {
      if (observer.error) runGuarded(() => observer.error!.call(observer, error), report);
      else report(error);
    },
    complete: () => {
      if (observer.complete) runGuarded(() => observer.complete!.call(observer), report);
    },
  };
}

/** Calls a listener; what it throws, or the rejection of the promise it returns, is reported. */
export function runGuarded(listener: () => unknown, report: ListenerErrorReporter): void {
  try {
    const result = listener();
    if (isPromiseLike(result)) result.then(undefined, report);
  } catch (error) {
    report(error);
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
