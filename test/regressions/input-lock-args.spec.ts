// Lock arguments whose serialization runs code that throws (a getter, a toJSON, a Proxy trap, a revoked Proxy) are
// refused with UnserializableLockArgsError naming the path where it threw and what it threw; a RangeError of the
// user's is not mistaken for a stack overflow.
import { describe, expect, it } from '@jest/globals';
import { UnserializableLockArgsError } from '../../lib/index.js';
import { canonicalJson } from '../../lib/digest/canonical-json.js';

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

const HOSTILE: [string, () => unknown, string, RegExp][] = [
  [
    'a getter that throws a TypeError',
    () => ({
      a: 1,
      nested: {
        get id(): string {
          throw new TypeError('getter boom');
        },
      },
    }),
    '$.nested.id',
    /reading it threw TypeError: getter boom$/,
  ],
  [
    'a getter that throws a RangeError',
    () => [
      {
        get when(): string {
          throw new RangeError('Invalid time value');
        },
      },
    ],
    '$[0].when',
    /reading it threw RangeError: Invalid time value$/,
  ],
  [
    'a toJSON that throws',
    () => ({
      x: {
        toJSON() {
          throw new Error('toJSON boom');
        },
      },
    }),
    '$.x',
    /reading it threw Error: toJSON boom$/,
  ],
  ['a revoked Proxy', () => [revokedProxy()], '$[0]', /reading it threw TypeError: .*revoked/],
  [
    'a Proxy whose get trap throws',
    () =>
      new Proxy(
        {},
        {
          get() {
            throw new Error('trap boom');
          },
        },
      ),
    '$',
    /reading it threw Error: trap boom$/,
  ],
  [
    'a thrown non-Error',
    () => ({
      get id(): string {
        // eslint-disable-next-line @typescript-eslint/only-throw-error
        throw 'x'.repeat(10_000);
      },
    }),
    '$.id',
    /reading it threw Error: x+…$/,
  ],
];

describe('canonicalJson: lock arguments whose own code throws', () => {
  it.each(HOSTILE)('%s: UnserializableLockArgsError at the path where it threw', (_label, make, path, reason) => {
    let error: unknown;
    try {
      canonicalJson(make());
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(UnserializableLockArgsError);
    expect((error as UnserializableLockArgsError).path).toBe(path);
    expect((error as UnserializableLockArgsError).reason).toMatch(reason);
    expect((error as Error).message).not.toMatch(/nested too deeply/);
    expect((error as Error).message.length).toBeLessThan(3_000);
  });

  it('valid values still serialize as before', () => {
    expect(canonicalJson({ b: [1, 'x', { d: null }], a: new Date(0), c: new Number(2) })).toBe(
      '{"a":"1970-01-01T00:00:00.000Z","b":[1,"x",{"d":null}],"c":2}',
    );
  });
});
