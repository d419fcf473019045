import type { Cluster, Redis } from 'ioredis';
import { isHandedOver } from '../../idempotency/step-handover.js';
import { settledMessage } from '../../idempotency/waiters-channel.js';
import { isParkedScore } from '../../locks/lock-marks.js';
import type { LockStore } from '../../locks/lock-store.js';
import { KEY_SUFFIX, parseOwnKey, type UniqueJobsKeys } from '../../redis/keys.js';
import { parseRuntimeLockOwner, PARKER_REPLACED } from '../../redis/runtime-lock-owner.js';
import type { RedisScripts } from '../../redis/redis-scripts.js';
import { jobStatus, ownerStatuses } from './job-statuses.js';
import type { ReapedItem } from './reap-report.interface.js';
import type { ReaperPass } from './reaper-pass.js';
import type { Suspect } from './suspect-confirmation.js';

/** Owners of one lock looked at per key (the oldest first). */
const MAX_LOCK_OWNERS = 100;

/**
 * The reaper's look at one key of its scan: what it releases at once (ended leases, a deduplication key whose job is
 * gone) and what it suspects (a general-path lock, a parked run-time lock or an idempotency claim whose job is gone or
 * finished: released only if still so after the grace). Keys neither the library's nor a queue's deduplication key are
 * left alone.
 */
export class ReaperKeyInspector {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string,
    private readonly scripts: RedisScripts,
    private readonly locks: LockStore,
    private readonly keys: UniqueJobsKeys,
  ) {}

  /** Looks at one key; releases what needs no re-check, and collects suspects that do. Other keys are left alone. */
  async inspect(
    key: string,
    pass: ReaperPass,
    dryRun: boolean,
    record: (item: ReapedItem) => void,
    suspects: Suspect[],
    serverNow: () => number,
  ): Promise<void> {
    const dry = dryRun ? '1' : '0';
    const deduplication = pass.deduplicationSpaceOf(key);
    if (deduplication) {
      // A key whose job is gone is released at once; one whose job finished only after the grace (see the script).
      const reap = (mode: string) =>
        this.scripts.run('reapDeduplication', [key], [deduplication.jobKeyPrefix, mode]) as Promise<
          [string, string] | null
        >;
      const orphan = await reap(dryRun ? '1' : '2');
      if (!orphan) return;
      const item: ReapedItem = { key, kind: 'deduplicationKey', jobId: orphan[0], reason: orphan[1] };
      if (dryRun || orphan[1] === 'job gone') record(item);
      else suspects.push({ item, statuses: async () => [], release: async () => (await reap('0')) !== null });
      return;
    }
    // Parsed (in linear time) only under the library's prefix.
    if (!key.startsWith(this.keys.ownKeyStart)) return;
    const own = parseOwnKey(key);
    if (own?.prefix !== this.prefix) return;
    const suffix = own.suffix;
    if (suffix === KEY_SUFFIX.running || suffix === KEY_SUFFIX.queued) {
      const kind = suffix === KEY_SUFFIX.running ? 'runtimeLease' : 'enqueueLock';
      const expired = (await this.scripts.run('reapExpiredLeases', [key], [dry])) as string[];
      for (const owner of expired) {
        const jobId = kind === 'runtimeLease' ? parseRuntimeLockOwner(owner).jobId : owner;
        record({ key, kind, jobId, reason: 'lease ended' });
      }
      // A queued job renews nothing, so a general-path enqueue lock is checked against its job; a run-time lease only
      // when parked for a step job's next delivery (else a running handler renews it: only its end frees it).
      await this.suspectOwners(key, kind, expired, pass, suspects);
    } else if (suffix === KEY_SUFFIX.idempotency) {
      await this.suspectIdempotencyClaim(key, suspects, serverNow);
    }
  }

  private async suspectOwners(
    key: string,
    kind: 'enqueueLock' | 'runtimeLease',
    expired: readonly string[],
    pass: ReaperPass,
    suspects: Suspect[],
  ): Promise<void> {
    // RESP2 answers [member, score, …], RESP3 [[member, score], …]: flatten both.
    const reply = (await this.client.call('ZRANGE', key, 0, MAX_LOCK_OWNERS - 1, 'WITHSCORES')) as unknown[];
    const owners = reply.flat().map(String);
    for (let i = 0; i < owners.length; i += 2) {
      const [owner, score] = [owners[i], owners[i + 1]];
      if (expired.includes(owner)) continue;
      const runtime = kind === 'runtimeLease';
      if (runtime && !isParkedScore(Number(score))) continue;
      const parsed = runtime ? parseRuntimeLockOwner(owner) : { jobId: owner };
      const { jobId } = parsed;
      // A run-time lock's job is not marked with its digest (no enqueue lock): its job's status decides, in the queue
      // its owner names (a bare id, written by an earlier build, in every queue), and whether it parked a step.
      const digest = runtime ? undefined : parseOwnKey(key)?.tag;
      const statusesOf = async () =>
        ownerStatuses(
          this.client,
          pass,
          jobId,
          { digest, parkedIn: runtime ? parseOwnKey(key)?.tag : undefined },
          runtime ? await pass.queuesNamedBy(parsed) : undefined,
        );
      const statuses = await statusesOf();
      if (statuses.includes('live')) continue;
      const reason = statuses.includes('finished')
        ? 'job finished'
        : statuses.includes('another')
          ? runtime
            ? PARKER_REPLACED
            : 'its job id now names a job of another digest'
          : 'job gone';
      suspects.push({
        item: { key, kind, jobId, reason },
        statuses: statusesOf,
        // Compare-and-set on what was read: a general-path slot whose job is gone by its mark (the library's moves of the
        // job keep it: a retry's backoff retime or a guarded changeDelay that crossed the removal, during the grace; a
        // job added again with the id takes another), else the very lease read (a finished job retried meanwhile
        // re-enters its slot with its mark, and a new lease).
        release: (now) =>
          !runtime && now.length > 0 && now.every((status) => status === 'gone')
            ? this.locks.releaseHold(key, owner, score)
            : this.locks.releaseLease(key, owner, score),
      });
    }
  }

  private async suspectIdempotencyClaim(key: string, suspects: Suspect[], serverNow: () => number): Promise<void> {
    const [state, owner, until, jobKey, jobId, jobAt] = await this.client.hmget(
      key,
      'state',
      'owner',
      'until',
      'jobKey',
      'job',
      'jobAt',
    );
    // Only a claim whose lease ended: a live lease may belong to a handler still running after its job was removed.
    // Or one parked between two steps of its job (handed over: no handler runs), whose job is gone or finished.
    const parked = isHandedOver(owner ?? undefined);
    if (state !== 'in_progress' || !owner || !jobKey || (!parked && Number(until) > serverNow())) return;
    // The job the record names, created when it says: a later job given its custom id is not it.
    const statusNow = () => jobStatus(this.client, jobKey, { createdAt: jobAt ?? undefined });
    const status = await statusNow();
    if (status === 'live') return;
    suspects.push({
      item: { key, kind: 'idempotencyClaim', jobId: jobId ?? undefined, reason: `job ${status}` },
      statuses: async () => [await statusNow()],
      release: async () => {
        const released = (await this.scripts.run('reapIdempotencyClaim', [key], [owner, parked ? 1 : 0])) === 1;
        // A parked record's mark (where its job lived) goes with it, and the deliveries that met it parked (they look
        // again within a lease) are woken.
        if (released && parked) {
          await this.client.del(this.keys.parkedRecord(owner));
          const recordId = parseOwnKey(key)?.tag;
          // Best effort, as every announcement on the channel: refused (a Redis user without it), they look again
          // within a lease, and the release it follows still counts.
          if (recordId !== undefined)
            await this.client
              .publish(this.keys.idempotencyWaitersChannel, settledMessage(recordId))
              .catch(() => undefined);
        }
        return released;
      },
    });
  }
}
