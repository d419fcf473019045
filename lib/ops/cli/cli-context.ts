import type { Cluster, Redis } from 'ioredis';
import { LockInspector } from '../inspection/lock-inspector.js';
import { UniqueJobsKeys } from '../../redis/keys.js';
import { QUEUE_REGISTRY_LIMIT, QueueRegistry } from '../../redis/queue-registry.js';
import { queuesUnderPrefix } from '../../redis/scan.js';
import type { InspectedQueue } from '../inspection/lock-inspection.interface.js';
import { DEFAULT_PREFIX } from '../../options/defaults.js';
import { DEFAULT_SURVEY_SCANS, surveyKeys } from '../inspection/key-survey.js';
import { integerOption, keyPartOption, type CliArgs } from './args.js';
import { CliError, EXIT } from './errors/cli.error.js';
import { clean, toJson, truncate, type CliIo } from './output.js';
import { listText } from './where.js';
import { rerunCommand } from './rerun-command.js';
import { within } from '../../common/within.js';
import {
  CLOSE_MS,
  COMMAND_ANSWER_S,
  CONNECT_ANSWER_S,
  DEFAULT_REDIS_URL,
  connectCli,
  parseRedisUrl,
  unreachableError,
} from './cli-connection.js';

/**
 * What every command works with: the options, the output, and (opened on first use, closed at the end) the Redis
 * client, the queues found under the BullMQ prefix and a lock inspector.
 */
export class CliContext {
  /** The library's key prefix (`--prefix`). */
  readonly prefix: string;
  /** BullMQ's key prefix (`--bull-prefix`). */
  readonly bullPrefix: string;
  /** `--json`. */
  readonly json: boolean;
  /** `--max-scans`: SCAN calls a command may spend looking for the library's keys elsewhere (default 50). */
  readonly maxScans: number;
  /** Seconds connecting and the first answer may take (`--timeout`, default 10). */
  private readonly connectAnswerS: number;
  /** Seconds a command may wait for its answer (`--timeout`, default 15). */
  private readonly commandAnswerS: number;
  private connecting: Promise<Redis | Cluster> | undefined;
  private lastError: Error | undefined;
  private queueList: InspectedQueue[] | undefined;
  private discovered: InspectedQueue[] | undefined;
  private readonly closers: (() => Promise<unknown>)[] = [];

  constructor(
    readonly args: CliArgs,
    readonly io: CliIo,
  ) {
    this.prefix = keyPartOption('prefix', args.values.prefix, DEFAULT_PREFIX);
    this.bullPrefix = keyPartOption('bull-prefix', args.values['bull-prefix'], 'bull');
    this.json = args.values.json ?? false;
    this.maxScans = integerOption('max-scans', args.values['max-scans'], DEFAULT_SURVEY_SCANS, 1, 100_000);
    const given = args.values.timeout;
    const timeout = given === undefined ? undefined : integerOption('timeout', given, 0, 1, 3600);
    this.connectAnswerS = timeout ?? CONNECT_ANSWER_S;
    this.commandAnswerS = timeout ?? COMMAND_ANSWER_S;
  }

  /** Prints a result: JSON with `--json`, else the human text `human()` builds. */
  print(result: unknown, human: () => string): void {
    this.io.out(this.json ? toJson(result) : human());
  }

  /** The Redis URL without its password, for messages. */
  get redisLabel(): string {
    const url = this.redisUrl();
    return `${url.protocol}//${url.hostname}:${url.port || '6379'}${url.pathname.length > 1 ? url.pathname : ''}`;
  }

  /**
   * The connected Redis client. Fails fast (one attempt, no reconnection) with exit code 2 when Redis cannot be
   * reached.
   */
  redis(): Promise<Redis | Cluster> {
    this.connecting ??= this.connect();
    return this.connecting;
  }

  /**
   * Now on Redis' clock (ms, one `TIME`): what lease ends and record times, written on that clock, are told against, so
   * an operator's machine whose clock is off shows no live lease as ended (or the reverse).
   */
  async serverNow(): Promise<number> {
    const [seconds, micros] = await (await this.redis()).time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  private async connect(): Promise<Redis | Cluster> {
    const client = await connectCli(this.redisUrl(), {
      cluster: this.args.values.cluster ?? false,
      label: this.redisLabel,
      connectAnswerS: this.connectAnswerS,
      commandAnswerS: this.commandAnswerS,
      onError: (error) => (this.lastError = error),
      unreachable: (error) => this.unreachable(error),
    });
    this.closers.push(async () => {
      await within(client.quit(), CLOSE_MS); // then dropped, answered or not
      client.disconnect();
    });
    return client;
  }

  /** The error reported when Redis cannot be reached or stops answering (exit code 2). */
  unreachable(error: unknown): CliError {
    return unreachableError(error, this.redisLabel, this.commandAnswerS, this.lastError);
  }

  /**
   * The queues under `--bull-prefix`, whatever `--queue` says: every BullMQ queue found by its `meta` key (a SCAN of
   * the whole key space: seconds on a Redis holding millions of keys). With `--registered-queues`, those the
   * application's processes recorded under `--prefix` (one read), when there are any: quick, but a queue the
   * application enqueues to without guarding it, or that only a process of an older version uses, is not there.
   */
  async discoveredQueues(): Promise<InspectedQueue[]> {
    if (this.discovered) return this.discovered;
    const registered = this.args.values['registered-queues'] ? await this.registeredQueues() : undefined;
    this.discovered = registered ?? (await this.scannedQueues());
    return this.discovered;
  }

  /** The queues under `--bull-prefix` in the registry, or `undefined` when it has none or may be incomplete. */
  private async registeredQueues(): Promise<InspectedQueue[] | undefined> {
    const names = await QueueRegistry.read(await this.redis(), new UniqueJobsKeys(this.prefix));
    if (names.length >= QUEUE_REGISTRY_LIMIT) return undefined;
    const queues = queuesUnderPrefix(names, this.bullPrefix);
    return queues.length > 0 ? queues : undefined;
  }

  /** Every BullMQ queue under `--bull-prefix`, found by its `meta` key. */
  private async scannedQueues(): Promise<InspectedQueue[]> {
    return LockInspector.discoverQueues(await this.redis(), this.bullPrefix);
  }

  /**
   * The BullMQ queues under `--bull-prefix` (found by their `meta` key). With `--queue`, that queue must be one of them:
   * a queue name given on the command line never reaches a key unless Redis knows the queue. When it is not, the error
   * names the BullMQ prefixes a queue of that name was found under (a bounded scan).
   */
  async queues(): Promise<InspectedQueue[]> {
    if (this.queueList) return this.queueList;
    let found = await this.discoveredQueues();
    const wanted = this.args.values.queue;
    if (wanted !== undefined && !found.some((queue) => queue.name === wanted)) {
      this.discovered = found = await this.scannedQueues(); // not in the registry: maybe a queue the library never ran
    }
    if (wanted !== undefined && !found.some((queue) => queue.name === wanted)) {
      throw await this.queueNotFound(
        wanted,
        `No queue ${JSON.stringify(truncate(wanted, 100))} under the BullMQ prefix "${this.bullPrefix}" (no ${this.bullPrefix}:<queue>:meta key); queues found: ${listText(found.map((queue) => clean(queue.name))) || 'none'}`,
      );
    }
    this.queueList = found;
    return found;
  }

  /**
   * The error of a queue that is not under `--bull-prefix`: `message`, then the BullMQ prefixes a queue of that name was
   * found under (a bounded scan), in words and in the `--json` error's `searched` and `elsewhere`.
   */
  async queueNotFound(name: string, message: string): Promise<CliError> {
    const found = await this.discoveredQueues();
    const survey = await surveyKeys(await this.redis(), { maxScans: this.maxScans });
    const elsewhere = survey.queues.filter((queue) => queue.queue === name && queue.bullPrefix !== this.bullPrefix);
    const extent = survey.complete
      ? `all ${survey.scannedKeys} keys scanned`
      : `none found in the first ${survey.scannedKeys} keys scanned; raise --max-scans to look further`;
    const hint =
      elsewhere.length > 0
        ? `; a queue ${JSON.stringify(truncate(name, 100))} exists under BullMQ prefix ${elsewhere.map((queue) => JSON.stringify(queue.bullPrefix)).join(', ')}: run again with --bull-prefix ${clean(elsewhere[0].bullPrefix)}${rerunText(rerunCommand(this.args, 'bull-prefix', elsewhere[0].bullPrefix))}`
        : `; no queue of that name under another BullMQ prefix either (${extent})`;
    return new CliError(`${message}${hint}`, EXIT.failed, false, {
      searched: { redis: this.redisLabel, bullPrefix: this.bullPrefix, queues: found.map((queue) => queue.name) },
      elsewhere: {
        queues: elsewhere,
        scannedKeys: survey.scannedKeys,
        scanCalls: survey.scanCalls,
        maxScans: survey.maxScans,
        complete: survey.complete,
      },
    });
  }

  /**
   * Where a command looked, for its `--json` answer (`searched`): the Redis, the library prefix, the BullMQ prefix and
   * the queues found under it, plus what the command adds (the exact keys).
   */
  async searched(extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const queues = (await this.discoveredQueues()).map((queue) => queue.name);
    return { redis: this.redisLabel, prefix: this.prefix, bullPrefix: this.bullPrefix, queues, ...extra };
  }

  /** A lock inspector over every queue found. */
  async inspector(): Promise<LockInspector> {
    return new LockInspector({ client: await this.redis(), prefix: this.prefix, queues: await this.queues() });
  }

  /** Runs `close` when the command ends (after its output). */
  onClose(close: () => Promise<unknown>): void {
    this.closers.unshift(close);
  }

  /**
   * Closes what the command opened, newest first (the connection last); a step Redis does not answer within
   * {@link CLOSE_MS} is given up.
   */
  async close(): Promise<void> {
    for (const close of this.closers.splice(0)) await within(close(), CLOSE_MS);
  }

  private redisUrl(): URL {
    return parseRedisUrl(this.args.values.redis ?? this.io.env.REDIS_URL ?? DEFAULT_REDIS_URL);
  }
}

/** ` (<command>)`, made safe for a terminal, or nothing when there is no command to print. */
function rerunText(command: string | undefined): string {
  return command === undefined ? '' : ` (${clean(command)})`;
}
