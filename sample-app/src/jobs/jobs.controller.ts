import { InjectQueue } from '@nestjs/bullmq';
import { Controller, Get, NotFoundException, Param } from '@nestjs/common';
import type { JobState, Queue } from 'bullmq';
import { CHARGES_QUEUE } from '../charges/charge-customer.job.js';
import { PAYMENTS_QUEUE } from '../payments/settle-payment.job.js';

/** One job, as `GET /jobs/:queue/:id` shows it. */
export interface JobView {
  id: string;
  name: string;
  state: JobState | 'unknown';
  /** What the job returned (for a replayed idempotency key: the stored result of the run that did the work). */
  result: unknown;
  /** When a worker last took the job (BullMQ's `processedOn`): set once it has started, even if it is delayed again. */
  startedAt?: number;
  failedReason?: string;
}

/** Job counts of a queue, by state. */
export type QueueCounts = Record<'waiting' | 'active' | 'delayed' | 'completed' | 'failed', number>;

/** Read-only views of the queues, to follow a job the API accepted. */
@Controller('jobs')
export class JobsController {
  private readonly queues: Map<string, Queue>;

  constructor(@InjectQueue(PAYMENTS_QUEUE) payments: Queue, @InjectQueue(CHARGES_QUEUE) charges: Queue) {
    this.queues = new Map([
      [PAYMENTS_QUEUE, payments],
      [CHARGES_QUEUE, charges],
    ]);
  }

  /** Job counts of every queue. */
  @Get()
  async counts(): Promise<Record<string, QueueCounts>> {
    const counts: Record<string, QueueCounts> = {};
    for (const [name, queue] of this.queues) {
      counts[name] = (await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed')) as QueueCounts;
    }
    return counts;
  }

  @Get(':queue/:id')
  async job(@Param('queue') queueName: string, @Param('id') id: string): Promise<JobView> {
    const queue = this.queues.get(queueName);
    // The state first: a job read before it finished would show no result even if the state read after says completed.
    const state = queue ? await queue.getJobState(id) : 'unknown';
    const job = state === 'unknown' ? undefined : await queue?.getJob(id);
    if (!job) throw new NotFoundException(`no job ${id} in queue ${queueName}`);
    return {
      id,
      name: job.name,
      state,
      result: job.returnvalue as unknown,
      ...(job.processedOn ? { startedAt: job.processedOn } : {}),
      ...(job.failedReason ? { failedReason: job.failedReason } : {}),
    };
  }
}
