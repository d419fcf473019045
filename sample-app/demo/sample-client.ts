import { setTimeout as sleep } from 'node:timers/promises';
import type { Charge } from '../src/charges/charge.entity.js';
import type { JobView, QueueCounts } from '../src/jobs/jobs.controller.js';
import type { PaymentEvent } from '../src/payments/payment-event.js';
import type { PaymentsOverview } from '../src/payments/payments.controller.js';
import type { WebhookReceipt } from '../src/payments/webhooks.controller.js';
import type { ProviderCall, ProviderCharge } from '../src/provider/fake-payment-provider.service.js';

/** The sample app's HTTP API, as the payment provider, an operator and the demo use it. */
export class SampleClient {
  constructor(readonly baseUrl: string) {}

  /** `POST /webhooks/payments`: a delivery of a provider event. */
  deliver(event: PaymentEvent): Promise<WebhookReceipt> {
    return this.request('POST', '/webhooks/payments', event, 202);
  }

  /** `GET /payments`, with the latest `duplicates` rejected deliveries. */
  payments(duplicates = 20): Promise<PaymentsOverview> {
    return this.request('GET', `/payments?duplicates=${duplicates}`);
  }

  /** `POST /orders/:id/charge`: enqueues ChargeCustomerJob. */
  chargeOrder(orderId: number, body: { customerId: string; amountCents: number }): Promise<{ jobId: string }> {
    return this.request('POST', `/orders/${orderId}/charge`, body, 202);
  }

  /** `GET /charges`: our charges table. */
  async charges(): Promise<Charge[]> {
    return (await this.request<{ charges: Charge[] }>('GET', '/charges')).charges;
  }

  /** `GET /provider/charges`: what the (simulated) payment provider charged, and every call it received. */
  provider(): Promise<{ charges: ProviderCharge[]; calls: ProviderCall[] }> {
    return this.request('GET', '/provider/charges');
  }

  /** `GET /jobs/:queue/:id`. */
  job(queue: string, id: string): Promise<JobView> {
    return this.request('GET', `/jobs/${queue}/${encodeURIComponent(id)}`);
  }

  /** `GET /jobs`: job counts per queue. */
  jobCounts(): Promise<Record<string, QueueCounts>> {
    return this.request('GET', '/jobs');
  }

  /** Polls the job until it has completed or failed (BullMQ has no push over HTTP); rejects after `timeoutMs`. */
  async finished(queue: string, id: string, timeoutMs = 30_000): Promise<JobView> {
    return this.poll(`job ${id} of ${queue} to finish`, timeoutMs, async () => {
      const job = await this.job(queue, id);
      return job.state === 'completed' || job.state === 'failed' ? job : undefined;
    });
  }

  /** Calls `probe` every 100 ms until it resolves a value; rejects after `timeoutMs`. */
  async poll<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
      await sleep(100);
    }
  }

  private async request<T>(method: string, path: string, body?: unknown, expectedStatus = 200): Promise<T> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (response.status !== expectedStatus) {
      throw new Error(`${method} ${path} answered ${response.status} (expected ${expectedStatus}): ${text}`);
    }
    return JSON.parse(text) as T;
  }
}
