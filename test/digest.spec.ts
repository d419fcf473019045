import { createHash } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { canonicalJson, digest, lockKey, UnserializableLockArgsError, type DigestInput } from '../lib/index.js';
import { deferred } from './support/deferred.js';
import { startApp, type TestApp } from './support/app.js';
import { lockKeys, redisClient, scanKeys, uniqueName } from './support/redis.js';
import { runtimeOwner } from './support/locks.js';

const DIGEST_FORM = /^v1:[0-9a-f]{64}$/;

/** The error `fn` throws, asserted to be an UnserializableLockArgsError. */
function unserializable(fn: () => unknown): UnserializableLockArgsError {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(UnserializableLockArgsError);
  return caught as UnserializableLockArgsError;
}

const base = (lockArgs: unknown, over: Partial<DigestInput> = {}): DigestInput => ({
  queue: 'payments',
  name: 'settle',
  lockArgs,
  ...over,
});

describe('canonicalJson', () => {
  it('sorts object keys at every depth, so key order never matters', () => {
    const a = { b: 1, a: { y: [1, { q: 1, p: 2 }], x: 'x' }, c: null };
    const b = { c: null, a: { x: 'x', y: [1, { p: 2, q: 1 }] }, b: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"x":"x","y":[1,{"p":2,"q":1}]},"b":1,"c":null}');
  });

  it('keeps array order and value types significant', () => {
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
    expect(canonicalJson(1)).not.toBe(canonicalJson('1'));
    expect(canonicalJson(null)).not.toBe(canonicalJson('null'));
    expect(canonicalJson([])).not.toBe(canonicalJson({}));
    expect(canonicalJson(true)).not.toBe(canonicalJson('true'));
  });

  it('serializes like JSON.stringify for plain JSON values (undefined properties are skipped)', () => {
    const value = { s: 'a"b\\c\n', n: -1.5e-7, t: true, f: false, z: null, arr: [0, 'x', { k: [] }] };
    expect(JSON.parse(canonicalJson(value))).toEqual(value);
    expect(canonicalJson({ a: 1, b: undefined })).toBe(canonicalJson({ a: 1 }));
    expect(canonicalJson(-0)).toBe('0');
  });

  it('passes Date (and anything with toJSON) through toJSON', () => {
    const date = new Date('2024-05-06T07:08:09.010Z');
    expect(canonicalJson(date)).toBe('"2024-05-06T07:08:09.010Z"');
    expect(canonicalJson({ at: date })).toBe('{"at":"2024-05-06T07:08:09.010Z"}');
    expect(canonicalJson({ v: { toJSON: () => ({ b: 2, a: 1 }) } })).toBe('{"v":{"a":1,"b":2}}');
  });

  it('accepts the same object reached twice when it is not a cycle', () => {
    const shared = { id: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe('{"a":{"id":1},"b":[{"id":1},{"id":1}]}');
  });

  it('handles unicode keys and values deterministically', () => {
    const a = { ключ: 'значение', 鍵: '値', '🔑': '🚀', é: 'e\u0301' };
    const b = { é: 'e\u0301', '🔑': '🚀', 鍵: '値', ключ: 'значение' };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(JSON.parse(canonicalJson(a))).toEqual(a);
  });

  it.each([
    ['a function', { a: 1, cb: () => 1 }, '$.cb'],
    ['a symbol', { s: Symbol('x') }, '$.s'],
    ['a BigInt', { amount: 10n }, '$.amount'],
    ['undefined at the top level', undefined, '$'],
    ['undefined in an array', { list: [1, undefined, 3] }, '$.list[1]'],
    ['NaN', { n: Number.NaN }, '$.n'],
    ['Infinity', [Number.POSITIVE_INFINITY], '$[0]'],
    ['-Infinity', { deep: { n: Number.NEGATIVE_INFINITY } }, '$.deep.n'],
    ['a Map', { m: new Map([['a', 1]]) }, '$.m'],
    ['a Set', { s: new Set([1]) }, '$.s'],
    ['a WeakMap', [new WeakMap()], '$[0]'],
    ['a RegExp', { r: /x/ }, '$.r'],
  ])('rejects %s with UnserializableLockArgsError naming the path', (_label, value, path) => {
    const error = unserializable(() => canonicalJson(value));
    expect(error.path).toBe(path);
    expect(error.message).toContain(path);
    expect(error.reason.length).toBeGreaterThan(0);
  });

  it('rejects circular structures (objects and arrays) with the path of the cycle', () => {
    const object: Record<string, unknown> = { a: 1, inner: { b: 2 } };
    (object.inner as Record<string, unknown>).back = object;
    expect(unserializable(() => canonicalJson(object)).path).toBe('$.inner.back');
    const array: unknown[] = [1];
    array.push(array);
    expect(unserializable(() => canonicalJson(array)).path).toBe('$[1]');
    expect(unserializable(() => canonicalJson(array)).reason).toMatch(/circular/);
  });
});

describe('digest', () => {
  it('has the form v1:<64 hex> and is stable', () => {
    const value = digest(base({ id: 'evt_1' }));
    expect(value).toMatch(DIGEST_FORM);
    expect(digest(base({ id: 'evt_1' }))).toBe(value);
  });

  it('gives equal digests for equal values regardless of key order, nested too', () => {
    expect(digest(base({ a: 1, b: { d: [1, { f: 1, e: 2 }], c: 2 } }))).toBe(
      digest(base({ b: { c: 2, d: [1, { e: 2, f: 1 }] }, a: 1 })),
    );
  });

  it('gives different digests for different values', () => {
    const digests = [
      { id: 'evt_1' },
      { id: 'evt_2' },
      { id: 'evt_1', extra: null },
      { id: 1 },
      { id: '1' },
      ['evt_1'],
      'evt_1',
      null,
      [1, 2],
      [2, 1],
      'é',
      'e\u0301',
    ].map((value) => digest(base(value)));
    expect(new Set(digests).size).toBe(digests.length);
  });

  it('includes the queue and the job name unless uniqueAcross leaves them out', () => {
    const args = { id: 'evt_1' };
    const plain = digest(base(args));
    expect(digest(base(args, { queue: 'refunds' }))).not.toBe(plain);
    expect(digest(base(args, { name: 'refund' }))).not.toBe(plain);

    const acrossQueues = digest(base(args, { uniqueAcross: 'queues' }));
    expect(acrossQueues).not.toBe(plain);
    expect(digest(base(args, { queue: 'refunds', uniqueAcross: 'queues' }))).toBe(acrossQueues);
    expect(digest(base(args, { name: 'refund', uniqueAcross: 'queues' }))).not.toBe(acrossQueues);

    const acrossNames = digest(base(args, { uniqueAcross: 'names' }));
    expect(digest(base(args, { name: 'refund', uniqueAcross: 'names' }))).toBe(acrossNames);
    expect(digest(base(args, { queue: 'refunds', uniqueAcross: 'names' }))).not.toBe(acrossNames);

    const both = digest(base(args, { uniqueAcross: ['queues', 'names'] }));
    expect(digest(base(args, { queue: 'q2', name: 'n2', uniqueAcross: ['names', 'queues'] }))).toBe(both);
  });

  it('does not confuse a queue name with a job name', () => {
    expect(digest(base(1, { queue: 'a', name: 'b' }))).not.toBe(digest(base(1, { queue: 'b', name: 'a' })));
    expect(digest(base(1, { queue: 'a:b', name: 'c' }))).not.toBe(digest(base(1, { queue: 'a', name: 'b:c' })));
  });

  it("includes the queue's BullMQ prefix unless it is 'bull': one queue name under two prefixes never shares a lock", () => {
    const args = { id: 'evt_1' };
    const plain = digest(base(args));
    expect(digest(base(args, { queuePrefix: 'bull' }))).toBe(plain);
    // BullMQ's default as Redis Cluster users write it is the default; any other prefix is its own.
    expect(digest(base(args, { queuePrefix: '{bull}' }))).toBe(plain);
    expect(digest(base(args, { queuePrefix: '{staging}' }))).not.toBe(digest(base(args, { queuePrefix: 'staging' })));
    expect(digest(base(args, { queuePrefix: '{}' }))).not.toBe(plain);
    const staging = digest(base(args, { queuePrefix: 'staging' }));
    expect(staging).toMatch(/^v1:[0-9a-f]{64}$/);
    expect(staging).not.toBe(plain);
    expect(digest(base(args, { queuePrefix: 'prod' }))).not.toBe(staging);
    expect(digest(base(args, { queuePrefix: 'staging' }))).toBe(staging);
    // Across queues too: the prefix stays when the queue's name is left out.
    const across = digest(base(args, { uniqueAcross: 'queues' }));
    expect(digest(base(args, { uniqueAcross: 'queues', queuePrefix: 'staging' }))).not.toBe(across);
    expect(digest(base(args, { queue: 'other', uniqueAcross: 'queues', queuePrefix: 'staging' }))).toBe(
      digest(base(args, { uniqueAcross: 'queues', queuePrefix: 'staging' })),
    );
    // The recipe: a fifth element after the lock arguments.
    const material = JSON.stringify(['v1', 'payments', 'settle', { id: 'evt_1' }, 'staging']);
    expect(digest({ queue: 'payments', name: 'settle', lockArgs: args, queuePrefix: 'staging' })).toBe(
      `v1:${createHash('sha256').update(material).digest('hex')}`,
    );
  });

  it('handles unicode, deep nesting and a 1 MB string', () => {
    expect(digest(base({ name: 'Zoë 🚀 東京' }))).toMatch(DIGEST_FORM);
    expect(digest(base({ name: 'Zoë 🚀 東京' }))).not.toBe(digest(base({ name: 'Zoe 🚀 東京' })));

    const deep = (depth: number, leaf: unknown): unknown => {
      let value: unknown = leaf;
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? { k: value } : [value];
      return value;
    };
    expect(digest(base(deep(1000, 'leaf')))).toMatch(DIGEST_FORM);
    expect(digest(base(deep(1000, 'leaf')))).toBe(digest(base(deep(1000, 'leaf'))));
    expect(digest(base(deep(1000, 'leaf')))).not.toBe(digest(base(deep(1000, 'leaf2'))));

    const big = 'x'.repeat(1024 * 1024);
    const bigDigest = digest(base({ payload: big }));
    expect(bigDigest).toMatch(DIGEST_FORM);
    expect(digest(base({ payload: `${big.slice(1)}y` }))).not.toBe(bigDigest);
    expect(lockKey(base({ payload: big })).length).toBeLessThan(200);
  });

  it('runs Date lock args through toJSON (a Date and its ISO string are the same lock)', () => {
    const at = new Date('2024-01-02T03:04:05.000Z');
    expect(digest(base({ at }))).toBe(digest(base({ at: '2024-01-02T03:04:05.000Z' })));
    expect(digest(base({ at }))).not.toBe(digest(base({ at: new Date('2024-01-02T03:04:06.000Z') })));
  });

  it.each([
    ['a function', { fn: () => undefined }, /\.fn$/],
    ['a symbol', { s: Symbol.iterator }, /\.s$/],
    ['a BigInt', { n: 1n }, /\.n$/],
    ['undefined at the top level', undefined, /^\$$/],
    ['undefined in an array', [1, undefined], /\[1\]$/],
    ['NaN', { n: Number.NaN }, /\.n$/],
    ['Infinity', { n: Number.POSITIVE_INFINITY }, /\.n$/],
    ['a Map', { m: new Map() }, /\.m$/],
    ['a Set', { s: new Set() }, /\.s$/],
  ])('rejects lock args with %s', (_label, lockArgs, path) => {
    const error = unserializable(() => digest(base(lockArgs)));
    expect(error.path).toMatch(path);
  });

  it('rejects circular lock args', () => {
    const args: Record<string, unknown> = { id: 1 };
    args.self = args;
    expect(unserializable(() => digest(base(args))).path).toMatch(/\.self$/);
  });
});

describe('lockKey', () => {
  const args = { id: 'evt_1' };

  it('is the BullMQ deduplication key bull:<queue>:de:uj:<digest> by default', () => {
    const d = digest(base(args));
    expect(lockKey(base(args))).toBe(`bull:payments:de:uj:${d}`);
    expect(lockKey({ ...base(args), lockLimit: 1, kind: 'enqueue' })).toBe(`bull:payments:de:uj:${d}`);
    const mine = digest(base(args, { queuePrefix: 'myapp' }));
    expect(lockKey({ ...base(args), queuePrefix: 'myapp' })).toBe(`myapp:payments:de:uj:${mine}`);
  });

  it('is <prefix>:{<digest>}:queued with lockLimit > 1 or unique across queues', () => {
    const d = digest(base(args));
    expect(lockKey({ ...base(args), lockLimit: 2 })).toBe(`uniquejobs:{${d}}:queued`);
    expect(lockKey({ ...base(args), lockLimit: 3, prefix: 'app1' })).toBe(`app1:{${d}}:queued`);
    const across = digest(base(args, { uniqueAcross: 'queues' }));
    expect(lockKey(base(args, { uniqueAcross: 'queues' }))).toBe(`uniquejobs:{${across}}:queued`);
    expect(lockKey({ ...base(args, { uniqueAcross: 'queues', queue: 'other' }), prefix: 'p' })).toBe(
      `p:{${across}}:queued`,
    );
    // unique across names only stays on the queue's deduplication key
    const acrossNames = digest(base(args, { uniqueAcross: 'names' }));
    expect(lockKey(base(args, { uniqueAcross: 'names' }))).toBe(`bull:payments:de:uj:${acrossNames}`);
  });

  it('is <prefix>:{<digest>}:running for the run-time lock', () => {
    const d = digest(base(args));
    expect(lockKey({ ...base(args), kind: 'runtime' })).toBe(`uniquejobs:{${d}}:running`);
    expect(lockKey({ ...base(args), kind: 'runtime', prefix: 'p2', lockLimit: 5 })).toBe(`p2:{${d}}:running`);
  });

  it('never contains raw user data, whatever the data holds', () => {
    const hostile = [
      '*',
      '{',
      '}',
      '{evil}',
      'a\nb',
      '\r\n*1\r\n$4\r\nPING\r\n',
      'key with spaces',
      ':',
      '?[a-z]',
      '\u0000',
      { '}': '{', '*': ['\n'] },
    ];
    for (const value of hostile) {
      for (const input of [
        base(value),
        { ...base(value), lockLimit: 2 },
        { ...base(value), kind: 'runtime' as const },
        base(value, { uniqueAcross: 'queues' }),
      ]) {
        const key = lockKey(input);
        expect(key).toMatch(/^(bull:payments:de:uj:v1:[0-9a-f]{64}|uniquejobs:\{v1:[0-9a-f]{64}\}:(queued|running))$/);
        expect(key).not.toMatch(/[*\n\r\s\0?[\]]/);
        // the only braces are the hash tag around the digest
        expect(key.replace(/\{v1:[0-9a-f]{64}\}/, '')).not.toMatch(/[{}]/);
      }
    }
  });
});

describe('digest and lock keys in Redis', () => {
  let app: TestApp | undefined;
  const redis = redisClient();
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(async () => redis.quit());

  it('the delay (run time) is not part of the digest: a delayed job and an immediate one are duplicates', async () => {
    const queueName = uniqueName('digest');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => data.id },
      paused: true,
    });
    const data = { id: 'evt_1', amount: 5 };
    const now = app.service.digestOf(queueName, 'settle', data);
    expect(now).toMatch(DIGEST_FORM);
    expect(app.service.digestOf(queueName, 'settle', data, { delay: 60_000 })).toBe(now);
    expect(app.service.digestOf(queueName, 'settle', { ...data, amount: 6 }, { delay: 5 })).toBe(now);
    expect(app.service.digestOf(queueName, 'settle', { id: 'evt_2' })).not.toBe(now);
    expect(app.service.digestOf(queueName, 'settle', data)).toBe(
      digest({ queue: queueName, name: 'settle', lockArgs: 'evt_1' }),
    );

    const delayed = await app.service.enqueue(app.queue, 'settle', data, { delay: 60_000 });
    expect(delayed).toMatchObject({ status: 'enqueued', digest: now });
    if (delayed.status !== 'enqueued') throw new Error('unexpected');
    expect(await delayed.job.getState()).toBe('delayed');
    const immediate = await app.service.enqueue(app.queue, 'settle', data);
    expect(immediate).toMatchObject({ status: 'duplicate', digest: now, existingJobId: delayed.job.id });
    expect(await app.queue.getJobCounts('delayed', 'wait')).toEqual({ delayed: 1, wait: 0 });
  });

  it('the key computed with lockKey() is the deduplication key found in Redis after an enqueue', async () => {
    const queueName = uniqueName('digest');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'until_executed', lockArgs: (data: { id: string }) => ({ id: data.id }) },
      paused: true,
    });
    const job = await app.queue.add('settle', { id: 'evt_1', amount: 10 });
    const expected = lockKey({ queue: queueName, name: 'settle', lockArgs: { id: 'evt_1' } });
    expect(await scanKeys(redis, `bull:${queueName}:de:*`)).toEqual([expected]);
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([expected]);
    expect(await redis.get(expected)).toBe(job.id);
  });

  it('the key computed with lockKey() is the semaphore key found in Redis (lockLimit 2)', async () => {
    const queueName = uniqueName('digest');
    app = await startApp({
      queue: queueName,
      unique: { lock: 'until_executed', lockLimit: 2 },
      paused: true,
    });
    const data = { id: 'evt_1', nested: { b: 2, a: 1 } };
    const job = await app.queue.add('settle', data);
    const expected = lockKey({ queue: queueName, name: 'settle', lockArgs: data, lockLimit: 2, prefix: app.prefix });
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([expected]);
    expect(await redis.zrange(expected, 0, '-1')).toEqual([job.id]);
  });

  it('the key computed with lockKey() is the run-time lock key held while the handler runs', async () => {
    const queueName = uniqueName('digest');
    const gate = deferred();
    const started = deferred();
    app = await startApp({
      queue: queueName,
      unique: { lock: 'while_executing', lockArgs: (data: { id: string }) => [data.id] },
      handler: async () => {
        started.resolve();
        await gate.promise;
      },
    });
    const job = await app.queue.add('settle', { id: 'evt_9' });
    await started.promise;
    const expected = lockKey({
      queue: queueName,
      name: 'settle',
      lockArgs: ['evt_9'],
      kind: 'runtime',
      prefix: app.prefix,
    });
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([expected]);
    expect(await redis.zrange(expected, 0, '-1')).toEqual([runtimeOwner(app, job.id!)]);
    gate.resolve();
    await app.finished(job);
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });

  it('hostile data never reaches a Redis key', async () => {
    const queueName = uniqueName('digest');
    app = await startApp({ queue: queueName, unique: { lock: 'until_executed' }, paused: true });
    const hostile = { a: '*', b: '{x}', c: 'line1\nline2', d: '}{', e: 'ᚠ ✓ \u0000' };
    await app.queue.add('settle', hostile);
    const keys = await lockKeys(redis, app.prefix, queueName);
    expect(keys).toEqual([lockKey({ queue: queueName, name: 'settle', lockArgs: hostile })]);
    expect(keys[0]).toMatch(new RegExp(`^bull:${queueName}:de:uj:v1:[0-9a-f]{64}$`));
  });

  it('unserializable data is rejected at enqueue and nothing is enqueued', async () => {
    const queueName = uniqueName('digest');
    app = await startApp({ queue: queueName, unique: { lock: 'until_executed' }, paused: true });
    await expect(app.service.enqueue(app.queue, 'settle', { n: 1n })).rejects.toBeInstanceOf(
      UnserializableLockArgsError,
    );
    await expect(app.queue.add('settle', { list: [undefined] })).rejects.toMatchObject({
      name: 'UnserializableLockArgsError',
      path: expect.stringMatching(/\.list\[0\]$/),
    });
    expect(await app.queue.getJobCounts('wait', 'delayed', 'prioritized')).toEqual({
      wait: 0,
      delayed: 0,
      prioritized: 0,
    });
    expect(await lockKeys(redis, app.prefix, queueName)).toEqual([]);
  });
});
