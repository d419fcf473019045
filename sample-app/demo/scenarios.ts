import type { ChargeResult } from '../src/charges/charge-customer.job.js';
import type { PaymentEvent } from '../src/payments/payment-event.js';
import type { Settlement } from '../src/payments/payments.service.js';
import type { WebhookReceipt } from '../src/payments/webhooks.controller.js';
import { describeExit } from './app-process.js';
import type { SampleApp } from './sample-app.js';
import { SampleClient } from './sample-client.js';

/** One expectation of a scenario: a row of the demo's table, an assertion of the end-to-end test. */
export interface Check {
  scenario: number;
  what: string;
  expected: string;
  observed: string;
  ok: boolean;
}

/** A scenario of the payments story, run over HTTP against the sample app. */
export interface Scenario {
  number: number;
  title: string;
  run(story: PaymentsStory): Promise<Check[]>;
}

/** The hold points the first worker must arm (`SampleApp.start({ holdPoints })`) for scenarios 1 and 4. */
export const HOLD_POINTS = ['settle:evt_123', 'charge:48213'];

/** The scenarios, in order: each one builds on the state the previous ones left. */
export const SCENARIOS: readonly Scenario[] = [
  {
    number: 1,
    title: 'evt_123 delivered, then re-delivered 5 times while its job works → 1 job, 5 duplicates, 1 settlement',
    run: (story) => story.redeliveredWhileWorking(),
  },
  {
    number: 2,
    title: 'evt_456 delivered at the same time → independent, settled',
    run: (story) => story.independentEvent(),
  },
  {
    number: 3,
    title: 'evt_123 re-delivered after its job completed → runs again, changes nothing',
    run: (story) => story.lateRedelivery(),
  },
  {
    number: 4,
    title: 'order 48213 charged 3 times, worker SIGKILLed mid-transaction and restarted → exactly one charge',
    run: (story) => story.workerKilledMidCharge(),
  },
  {
    number: 5,
    title: '1,000 deliveries of 100 events from 8 concurrent senders → 100 settlements',
    run: (story) => story.concurrentDeliveries(),
  },
];

const PAYMENTS = 'payments';
const CHARGES = 'charges';
const ORDER = { orderId: 48213, customerId: 'cus_4821', amountCents: 12_900 };

/**
 * The seed's story against a running {@link SampleApp}, over HTTP only (plus the worker process for holding and killing
 * it). Each method is one scenario and returns its checks; `progress` hears what is happening meanwhile.
 */
export class PaymentsStory {
  readonly client: SampleClient;
  private evt123JobId?: string;
  private evt456?: WebhookReceipt;

  constructor(
    readonly app: SampleApp,
    private readonly progress: (line: string) => void = () => undefined,
  ) {
    this.client = new SampleClient(app.url);
  }

  /** Scenario 1. Also delivers evt_456, alongside the re-deliveries (scenario 2 checks it). */
  async redeliveredWhileWorking(): Promise<Check[]> {
    const check = checker(1);
    this.progress('POST /webhooks/payments evt_123');
    const first = await this.client.deliver(delivery('evt_123', 4200, 1));
    if (first.status !== 'enqueued') return [check('first delivery', 'enqueued', receipt(first), false)];
    const jobId = (this.evt123JobId = first.jobId);
    await this.app.worker.held('settle:evt_123');
    this.progress(`job ${jobId} is settling evt_123 (held there); POST evt_123 5 more times, and evt_456, at once`);
    const [evt456, ...again] = await Promise.all([
      this.client.deliver(delivery('evt_456', 990, 1)),
      ...[2, 3, 4, 5, 6].map((attempt) => this.client.deliver(delivery('evt_123', 4200, attempt))),
    ]);
    this.evt456 = evt456;
    const stateMeanwhile = (await this.client.job(PAYMENTS, jobId)).state;
    this.app.worker.release('settle:evt_123');
    const job = await this.client.finished(PAYMENTS, jobId);
    const overview = await this.client.payments(50);
    const duplicates = again.filter((r) => r.status === 'duplicate' && r.existingJobId === jobId).length;
    const listed = overview.rejectedDuplicates.latest.filter(
      (d) => d.eventId === 'evt_123' && d.existingJobId === jobId,
    );
    const rows = overview.payments.filter((payment) => payment.eventId === 'evt_123');
    return [
      check('first delivery', 'enqueued', receipt(first), true),
      check(`job ${jobId} while the re-deliveries arrived`, 'active', stateMeanwhile),
      check('5 re-deliveries', `5 duplicates of job ${jobId}`, summarize(again), duplicates === 5),
      check('rejected duplicates listed (GET /payments)', '5', String(listed.length)),
      check(`job ${jobId}`, 'completed', job.state),
      check(
        'settlements of evt_123',
        `1, by job ${jobId}`,
        settlements(rows),
        rows.length === 1 && rows[0].settledByJobId === jobId,
      ),
    ];
  }

  /** Scenario 2: evt_456, delivered during scenario 1. */
  async independentEvent(): Promise<Check[]> {
    const check = checker(2);
    const evt456 = this.evt456;
    if (!evt456) throw new Error('scenario 2 needs scenario 1 (which delivers evt_456)');
    if (evt456.status !== 'enqueued') return [check('evt_456 delivered', 'enqueued', receipt(evt456), false)];
    const job = await this.client.finished(PAYMENTS, evt456.jobId);
    const rows = (await this.client.payments(0)).payments.filter((payment) => payment.eventId === 'evt_456');
    return [
      check('evt_456 delivered', 'enqueued, a job of its own', receipt(evt456), evt456.jobId !== this.evt123JobId),
      check(`job ${evt456.jobId}`, 'completed', job.state),
      check(
        'settlements of evt_456',
        `1, by job ${evt456.jobId}`,
        settlements(rows),
        rows.length === 1 && rows[0].settledByJobId === evt456.jobId,
      ),
    ];
  }

  /** Scenario 3: the lock ended with the job; `@IdempotencyKey` replays the settlement instead of settling again. */
  async lateRedelivery(): Promise<Check[]> {
    const check = checker(3);
    const settledBy = this.evt123JobId;
    if (!settledBy) throw new Error('scenario 3 needs scenario 1 (which settles evt_123)');
    this.progress(`evt_123 is settled by job ${settledBy} and its lock is gone; POST evt_123 once more`);
    const late = await this.client.deliver(delivery('evt_123', 4200, 7));
    if (late.status !== 'enqueued') return [check('late delivery', 'enqueued', receipt(late), false)];
    const job = await this.client.finished(PAYMENTS, late.jobId);
    const result = job.result as Settlement | null;
    const replayed = result?.settledByJobId === settledBy;
    const rows = (await this.client.payments(0)).payments.filter((payment) => payment.eventId === 'evt_123');
    return [
      check('late delivery', 'enqueued (a new job)', receipt(late), true),
      check(
        `job ${late.jobId}`,
        `completed with job ${settledBy}'s settlement`,
        `${job.state} with ${replayed ? `job ${settledBy}'s settlement` : `settlement ${JSON.stringify(result)}`}`,
        job.state === 'completed' && replayed,
      ),
      check('settlements of evt_123', `still 1, by job ${settledBy}`, `still ${settlements(rows)}`, rows.length === 1),
    ];
  }

  /**
   * Scenario 4, effect-once in the app's own transaction: order 48213 is charged, then charged twice more while its job
   * works (a shop that retried). The worker is SIGKILLed while that job's transaction is open: the provider has
   * charged, our `charges` row is written in the transaction, nothing is committed, and the repeats wait for the
   * order's idempotency key. The killed run's claim was part of its transaction, so it rolled back with it. The
   * restarted worker gets the jobs back from BullMQ: one run claims the key, calls the provider again with the same
   * downstream key (same charge back) and commits our row; the others replay its result.
   */
  async workerKilledMidCharge(): Promise<Check[]> {
    const check = checker(4);
    this.progress('POST /orders/48213/charge');
    const { jobId } = await this.client.chargeOrder(ORDER.orderId, ORDER);
    const held = await this.app.worker.held('charge:48213');
    this.progress(
      `job ${jobId} charged at the provider and wrote charges row ${String(held.chargeId)} in its open transaction ` +
        '(held there); POST /orders/48213/charge twice more',
    );
    const repeats = (await Promise.all([1, 2].map(() => this.client.chargeOrder(ORDER.orderId, ORDER)))).map(
      (receipt) => receipt.jobId,
    );
    // A worker slot is free: a repeat starts, meets the order's key in progress and waits for it (in delayed, woken
    // when the key settles). Started is for good (BullMQ's processedOn); active is a moment between polls.
    const repeatStates = await this.client.poll('a repeat to start', 10_000, async () => {
      const views = await Promise.all(repeats.map((id) => this.client.job(CHARGES, id)));
      return views.some((view) => view.startedAt !== undefined) ? views.map((view) => view.state) : undefined;
    });
    const [providerAtKill, chargesAtKill] = await Promise.all([this.client.provider(), this.client.charges()]);
    this.progress(`SIGKILL the worker (pid ${this.app.worker.pid}) with job ${jobId}'s transaction open`);
    const exit = await this.app.worker.kill('SIGKILL');
    const worker = await this.app.restartWorker();
    this.progress(`worker restarted (pid ${worker.pid}); BullMQ hands it the interrupted jobs within a few seconds…`);
    const jobs = await Promise.all([jobId, ...repeats].map((id) => this.client.finished(CHARGES, id, 45_000)));
    const results = jobs.map((job) => job.result as ChargeResult | null);
    const charged = results[0];
    const provider = await this.client.provider();
    const providerCharges = provider.charges.filter((charge) => charge.description === `order ${ORDER.orderId}`);
    const keys = new Set(providerCharges.map((charge) => charge.idempotencyKey));
    const calls = provider.calls.filter((call) => keys.has(call.idempotencyKey));
    const ours = (await this.client.charges()).filter((charge) => charge.orderId === ORDER.orderId);
    const [key] = keys;
    const written = held.transactionOpen === true ? `in job ${jobId}'s open transaction` : 'outside a transaction';
    const completed = jobs.filter((job) => job.state === 'completed').length;
    const sameCharge = results.every(
      (result) => result?.chargeId === charged?.chargeId && result?.providerChargeId === charged?.providerChargeId,
    );
    return [
      check(
        'when the worker was killed',
        'provider charged; our row written, uncommitted',
        `${providerAtKill.charges.map((charge) => charge.id).join(', ') || 'no charge'} at the provider; ` +
          `row ${String(held.chargeId)} ${written}, ${count(chargesAtKill.length, 'row')} committed`,
        providerAtKill.charges.length === 1 &&
          typeof held.chargeId === 'number' &&
          held.transactionOpen === true &&
          chargesAtKill.length === 0,
      ),
      check(
        'the 2 repeats meanwhile',
        "waiting for the order's key, not run",
        `${repeatStates.join(', ')}; ${count(providerAtKill.calls.length, 'provider call')} in all`,
        repeatStates.every((state) => state === 'active' || state === 'waiting' || state === 'delayed') &&
          providerAtKill.calls.length === 1,
      ),
      check('the worker', 'killed by SIGKILL', `killed by ${describeExit(exit)}`, exit.signal === 'SIGKILL'),
      check(
        'the 3 jobs after the restart',
        'completed, all with one charge',
        `${completed} completed, with ${[...new Set(results.map((result) => result?.providerChargeId))].join(', ')}`,
        completed === 3 && sameCharge,
      ),
      check(
        'the run that charged',
        'one of the 3, on a claim of its own',
        charged
          ? `job ${charged.chargedByJobId}, ${charged.takeover ? 'told of the stalled run' : 'a fresh claim'}`
          : 'none',
        charged !== null && [jobId, ...repeats].map(String).includes(String(charged.chargedByJobId)),
      ),
      check('charges at the provider', '1', String(providerCharges.length)),
      check('calls to the provider', '2, with one key', `${calls.length}, with ${count(keys.size, 'key')}`),
      check(
        'the key sent to the provider',
        'derived (uj_…), no order data',
        key ? `${key.slice(0, 12)}…` : 'none',
        key !== undefined && /^uj_[\w-]+$/.test(key) && !key.includes(String(ORDER.orderId)),
      ),
      check(
        'our charges for order 48213',
        "1, the provider's charge",
        ours.map((charge) => charge.providerChargeId).join(', ') || '0',
        ours.length === 1 && ours[0].providerChargeId === providerCharges[0]?.id && ours[0].id === charged?.chargeId,
      ),
    ];
  }

  /** Scenario 5: duplicates under load, from concurrent senders. */
  async concurrentDeliveries(events = 100, perEvent = 10, senders = 8): Promise<Check[]> {
    const check = checker(5);
    const ids = Array.from({ length: events }, (_, i) => `evt_bulk_${String(i).padStart(3, '0')}`);
    const queue = shuffle(ids.flatMap((id) => Array.from({ length: perEvent }, () => id)));
    const total = queue.length;
    const deadBefore = (await this.client.payments(0)).rejectedDuplicates.total;
    const receipts: WebhookReceipt[] = [];
    const attempts = new Map<string, number>();
    this.progress(`${total} deliveries of ${events} events from ${senders} concurrent senders…`);
    const sender = async () => {
      for (let id = queue.pop(); id !== undefined; id = queue.pop()) {
        const attempt = (attempts.get(id) ?? 0) + 1;
        attempts.set(id, attempt);
        receipts.push(await this.client.deliver(delivery(id, 1000 + ids.indexOf(id), attempt)));
        if (receipts.length % 250 === 0) this.progress(`${receipts.length}/${total} deliveries answered`);
      }
    };
    await Promise.all(Array.from({ length: senders }, sender));
    const enqueued = receipts.filter((r) => r.status === 'enqueued').length;
    // Most repeats arrive after their event's job completed (the lock is gone): they are new jobs, and
    // @IdempotencyKey replays the settled result instead of settling again.
    this.progress(
      `${enqueued} jobs enqueued, ${receipts.length - enqueued} duplicates rejected (a repeat that arrives after its event's job completed is enqueued, and replayed by @IdempotencyKey); waiting for them…`,
    );
    let lastReport = 0;
    const { settled, counts } = await this.client.poll('the jobs to finish', 60_000, async () => {
      const [overview, all] = await Promise.all([this.client.payments(0), this.client.jobCounts()]);
      const counts = all[PAYMENTS];
      const pending = counts.waiting + counts.active + counts.delayed;
      const settled = overview.payments.filter((payment) => payment.eventId.startsWith('evt_bulk_'));
      if (Date.now() - lastReport > 1000) {
        lastReport = Date.now();
        // Every event can be settled while later deliveries' jobs still wait to replay its settlement.
        this.progress(`${settled.length}/${events} events settled; ${count(pending, 'job')} still to run or replay`);
      }
      return pending === 0 ? { settled, counts } : undefined;
    });
    const deadAdded = (await this.client.payments(0)).rejectedDuplicates.total - deadBefore;
    const duplicates = receipts.length - enqueued;
    const distinct = new Set(settled.map((payment) => payment.eventId)).size;
    return [
      check(
        'deliveries answered 202',
        String(total),
        `${receipts.length}: ${enqueued} enqueued, ${duplicates} duplicates`,
        receipts.length === total,
      ),
      check(
        'new entries in the dead set',
        `${duplicates}, one per duplicate`,
        String(deadAdded),
        deadAdded === duplicates,
      ),
      check('failed jobs', '0', String(counts.failed)),
      check(
        'settlements',
        `${events}, one per event`,
        `${settled.length} (${enqueued - distinct} later jobs replayed)`,
        settled.length === events && distinct === events,
      ),
    ];
  }
}

/** A `check(what, expected, observed, ok = observed === expected)` bound to a scenario. */
function checker(scenario: number) {
  return (what: string, expected: string, observed: string, ok = observed === expected): Check => ({
    scenario,
    what,
    expected,
    observed,
    ok,
  });
}

/** One delivery of a provider event; the delivery attempt and timestamp jitter, as they do at real providers. */
function delivery(id: string, amount: number, attempt: number): PaymentEvent {
  return {
    id,
    type: 'payment.settled',
    data: { amount, currency: 'EUR', deliveryAttempt: attempt, sentAt: new Date().toISOString() },
  };
}

function receipt(r: WebhookReceipt): string {
  return r.status === 'enqueued' ? `enqueued as job ${r.jobId}` : `duplicate of job ${r.existingJobId}`;
}

/** `5 duplicates of job 1`, or `4 duplicates of job 1, 1 enqueued`. */
function summarize(receipts: WebhookReceipt[]): string {
  const counts = new Map<string, number>();
  for (const r of receipts) {
    const text = r.status === 'enqueued' ? 'enqueued' : `duplicates of job ${r.existingJobId}`;
    counts.set(text, (counts.get(text) ?? 0) + 1);
  }
  return [...counts].map(([text, n]) => `${n} ${text}`).join(', ');
}

/** `1 key`, `2 keys`. */
function count(n: number, noun: string): string {
  return `${n === 1 ? 'one' : n} ${noun}${n === 1 ? '' : 's'}`;
}

function settlements(rows: { settledByJobId: string }[]): string {
  return rows.length === 0 ? '0' : `${rows.length}, by job ${rows.map((row) => row.settledByJobId).join(', ')}`;
}

/** A deterministic shuffle (mulberry32), so that every run sends the same order. */
function shuffle<T>(items: T[], seed = 48213): T[] {
  let state = seed;
  const random = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}
