// Every `unique-jobs` command of README.md and docs/*.md, run as written by `sh` (with `npx unique-jobs` the built
// executable) against the state the README's app leaves: its SettlePaymentJob definition (evaluated from the README's
// text), evt_123 settled once (an idempotency record), enqueued again (its lock held) and delivered a third time (a
// rejected duplicate in the dead set). On a redis-server of its own, so the commands run with their default prefixes.
// Each must exit 0 with nothing on stderr, print the output the document shows, and do what it says: `digest` must
// print the digest the app's lock has and the key it lives in.
import 'reflect-metadata';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { BullModule, getQueueToken, Processor, WorkerHost } from '@nestjs/bullmq';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Job, Queue } from 'bullmq';
import {
  defineUniqueJob,
  IdempotencyKey,
  UniqueJob,
  UniqueJobsModule,
  UniqueJobsService,
  type IdempotencyJob,
  type UniqueJobDefinition,
} from '../../lib/index.js';
import { deferred } from '../support/deferred.js';
import { asDuplicate } from '../support/locks.js';
import { PrivateRedis } from '../support/private-redis.js';
import { cliExamples, documents, matchesShown, readDocument, ROOT, type CliExample } from './doc-examples.js';

jest.setTimeout(300_000);

interface SettlePaymentData {
  eventId: string;
  payload: { amount: number; currency: string };
}

const EVT_123: SettlePaymentData = { eventId: 'evt_123', payload: { amount: 4200, currency: 'EUR' } };
const BIN = join(ROOT, '.build/lib/ops/cli/bin.js');

/** The README's `defineUniqueJob<SettlePaymentData>({…})` argument, evaluated as written. */
function readmeDefinition(): UniqueJobDefinition<SettlePaymentData> {
  const text = /defineUniqueJob<SettlePaymentData>\((\{[\s\S]*?\n\})\);/.exec(readDocument('README.md'))?.[1];
  if (!text) throw new Error('README.md: no defineUniqueJob<SettlePaymentData>({ … }) found');
  const options = runInNewContext(`(${text})`) as UniqueJobDefinition<SettlePaymentData>;
  return defineUniqueJob<SettlePaymentData>({ ...options });
}

/** Runs a command line with `sh`, `npx unique-jobs` and `unique-jobs` being the built CLI. */
function sh(command: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('sh', ['-c', command], { env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('the unique-jobs commands of the docs, run against the README app', () => {
  let redis: PrivateRedis;
  let moduleRef: TestingModule;
  let queue: Queue<SettlePaymentData>;
  let service: UniqueJobsService;
  let shims: string;
  let lockKeyOfEvt123: string;
  let digestOfEvt123: string;
  const definition = readmeDefinition();
  const examples = documents().flatMap(cliExamples);

  beforeAll(async () => {
    if (!existsSync(BIN))
      throw new Error(`${BIN} is missing: run the tests with \`npm test\` (it compiles lib/ into .build/)`);
    redis = await PrivateRedis.start();
    shims = mkdtempSync(join(tmpdir(), 'unique-jobs-doc-bin-'));
    const run = `exec "${process.execPath}" "${BIN}" "$@"`;
    writeFileSync(join(shims, 'unique-jobs'), `#!/bin/sh\n${run}\n`);
    writeFileSync(join(shims, 'npx'), `#!/bin/sh\n[ "$1" = unique-jobs ] || exit 127\nshift\n${run}\n`);
    for (const name of ['unique-jobs', 'npx']) chmodSync(join(shims, name), 0o755);

    // ── the README's app: settle-payment.job.ts, the processor (with the README's @IdempotencyKey on the default Redis
    // store), app.module.ts ──
    const settled = deferred();
    @Injectable()
    class PaymentsService {
      settle(eventId: string) {
        settled.resolve();
        return { settled: eventId };
      }
    }
    @Processor('payments', { autorun: false })
    @UniqueJob(definition)
    @IdempotencyKey({ key: (job: IdempotencyJob<SettlePaymentData>) => job.data.eventId, fingerprint: false })
    class SettlePaymentProcessor extends WorkerHost {
      constructor(private readonly payments: PaymentsService) {
        super();
      }
      async process(job: Job<SettlePaymentData>) {
        return this.payments.settle(job.data.eventId);
      }
    }
    moduleRef = await Test.createTestingModule({
      imports: [
        BullModule.forRoot({ connection: { host: '127.0.0.1', port: redis.port } }),
        BullModule.registerQueue({ name: 'payments' }),
        UniqueJobsModule.forRoot({ jobs: [definition], logger: false }),
      ],
      providers: [PaymentsService, SettlePaymentProcessor],
    }).compile();
    await moduleRef.init();
    queue = moduleRef.get<Queue<SettlePaymentData>>(getQueueToken('payments'));
    service = moduleRef.get(UniqueJobsService);

    // evt_123 settled once: its idempotency record is completed.
    const worker = moduleRef.get(SettlePaymentProcessor).worker;
    const first = await queue.add('settle', EVT_123);
    void worker.run();
    await settled.promise;
    await worker.pause(); // resolves once the active job finished
    expect(await first.getState()).toBe('completed');
    // The lock the app took for it, as Redis has it: the only deduplication key of the queue.
    await queue.add('settle', EVT_123);
    const keys = await redis.admin.keys('bull:payments:de:uj:*');
    expect(keys).toHaveLength(1);
    lockKeyOfEvt123 = keys[0];
    digestOfEvt123 = lockKeyOfEvt123.slice('bull:payments:de:uj:'.length);
    expect(digestOfEvt123).toBe(service.digestOf('payments', 'settle', EVT_123));
  });

  afterAll(async () => {
    await moduleRef?.close();
    await redis?.stop();
    if (shims) rmSync(shims, { recursive: true, force: true });
  });

  /** What a group of examples starts from: evt_123's lock held, a rejected duplicate of it in the dead set. */
  async function ensureState(): Promise<string> {
    if ((await redis.admin.exists(lockKeyOfEvt123)) === 0) await queue.add('settle', EVT_123);
    if ((await service.deadSet.size()) === 0) asDuplicate(await service.enqueue(queue, 'settle', EVT_123));
    const [entry] = await service.deadSet.list({ limit: 1 });
    return entry.id;
  }

  /** The command with its placeholders filled in: `v1:5d55…` (checked to begin the real digest), `<digest>`, `<id>`. */
  function fill(example: CliExample, entryId: string): string {
    const command = example.command
      .replace(/v1:([0-9a-f]+)…/g, (shown, hex: string) => {
        if (!digestOfEvt123.startsWith(`v1:${hex}`)) {
          throw new Error(`${example.where}: ${shown} is not the digest of evt_123's lock (${digestOfEvt123})`);
        }
        return digestOfEvt123;
      })
      .replaceAll('<digest>', digestOfEvt123)
      .replaceAll('<id>', entryId);
    if (/…|<[^>\s]+>/.test(command)) throw new Error(`${example.where}: a placeholder is left in: ${command}`);
    return command;
  }

  it('finds the examples: the runbook, the CLI section and its subsections', () => {
    const run = examples.filter((example) => example.kind === 'run');
    const inOperations = run.filter((example) => example.where.startsWith('docs/operations.md'));
    expect(inOperations.length).toBeGreaterThanOrEqual(15);
    expect(run.filter((example) => / digest /.test(example.command)).length).toBeGreaterThanOrEqual(4);
  });

  it('each runs, exits 0, prints what the document shows and does what it says', async () => {
    const env = { REDIS_URL: redis.url, PATH: `${shims}:${process.env.PATH ?? ''}`, NODE_OPTIONS: '' };
    const failures: string[] = [];
    let group = '';
    let entryId = '';
    for (const example of examples.filter((e) => e.kind === 'run')) {
      if (example.group !== group) {
        group = example.group;
        entryId = await ensureState();
      }
      const command = fill(example, entryId);
      const run = await sh(command, env);
      const stdout = run.stdout.replaceAll(redis.url, 'redis://127.0.0.1:6379');
      const fail = (why: string) =>
        failures.push(`${example.where}: \`${command}\`: ${why}\n${run.stdout}${run.stderr}`);
      if (run.code !== 0 || run.stderr !== '') {
        fail(`exit code ${run.code}`);
        continue;
      }
      if (example.expected) {
        const actual = stdout.trimEnd().split('\n');
        const shown = example.expected;
        if (actual.length !== shown.length || shown.some((line, i) => !matchesShown(line, actual[i]))) {
          fail(`prints\n${actual.join('\n')}\nthe document shows\n${shown.join('\n')}`);
        }
      }
      const words = command.replace(/\s+#.*$/, '').split(/\s+/);
      const [sub, action] = words.slice(words.indexOf('unique-jobs') + 1);
      const looksAt = (option: string) => words.includes(option);
      if (sub === 'digest') {
        const [printed, keyLine] = stdout.split('\n');
        if (printed !== digestOfEvt123) fail(`prints digest ${printed}; evt_123's lock has ${digestOfEvt123}`);
        if (keyLine !== `enqueue lock  ${lockKeyOfEvt123}`) fail(`names ${keyLine}; the lock is ${lockKeyOfEvt123}`);
        const holder = await redis.admin.get(lockKeyOfEvt123);
        if ((await queue.getJob(holder ?? ''))?.data.eventId !== 'evt_123')
          fail('the key it names holds no evt_123 job');
      } else if (sub === 'locks' && (action === 'list' || action === 'show') && !looksAt('--bull-prefix')) {
        if (!stdout.includes(digestOfEvt123)) fail(`does not show evt_123's lock ${digestOfEvt123}`);
      } else if (sub === 'locks' && action === 'release' && looksAt('--yes')) {
        if (!stdout.startsWith('Released 1 key')) fail('does not release the lock');
        if ((await redis.admin.exists(lockKeyOfEvt123)) === 1) fail('the lock is still held');
      } else if (sub === 'dead' && action === 'list') {
        if (!stdout.includes(entryId)) fail(`does not list entry ${entryId}`);
      } else if (sub === 'dead' && action === 'retry') {
        if (!stdout.startsWith(`Retried dead-set entry ${entryId}`)) fail('does not retry the entry');
      } else if (sub === 'keys' && words.includes('evt_123')) {
        if (!stdout.includes('State       completed')) fail("does not show evt_123's completed record");
      } else if (sub === 'reap') {
        if (!stdout.startsWith('Dry run: nothing was changed.')) fail('is not a dry run');
      }
    }
    expect(failures).toEqual([]);
  });

  it("the README's result shapes are those of UniqueJobsService.enqueue, and its job ids are the library's", async () => {
    const readme = readDocument('README.md');
    const comment = /\/\/ Or ask explicitly: ([^\n]*)\n\s*\/\/\s+(\|[^\n]*)/.exec(readme);
    expect(comment).not.toBeNull();
    const shapes = `${comment![1]} ${comment![2]}`.split('|').map((shape) =>
      shape
        .replace(/[{}]/g, '')
        .split(',')
        .map((field) => field.trim().split(':')[0])
        .filter((field) => field !== '')
        .sort(),
    );
    const data: SettlePaymentData = { eventId: 'evt_456', payload: { amount: 1, currency: 'EUR' } };
    const enqueued = await service.enqueue(queue, 'settle', data);
    const duplicate = await service.enqueue(queue, 'settle', data);
    const fields = (result: object) =>
      Object.entries(result)
        .filter(([, value]) => value !== undefined)
        .map(([key]) => key)
        .sort();
    expect(shapes).toEqual([fields(enqueued), fields(duplicate)]);

    // "an id of the library's — `u`, a per-process tag and a counter, like `uQ3xTm9bLkP0a1`":
    const libraryId = /^u[\w-]{12}[0-9a-z]+$/;
    const shown = /like `([^`]+)`/.exec(readme.slice(readme.indexOf('Job ids:')))?.[1];
    expect(shown).toMatch(libraryId);
    expect(enqueued.status === 'enqueued' && enqueued.job.id).toMatch(libraryId);
  });
});
