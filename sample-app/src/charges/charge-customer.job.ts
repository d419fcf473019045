/** Queue and job name of the charges. */
export const CHARGES_QUEUE = 'charges';
export const CHARGE_CUSTOMER_JOB = 'ChargeCustomerJob';

/** Charge a customer for an order. */
export interface ChargeCustomerData {
  orderId: number;
  customerId: string;
  amountCents: number;
}

/** What a charge returns: stored with the idempotency record and replayed to every later delivery of the order. */
export interface ChargeResult {
  orderId: number;
  /** Our `charges` row. */
  chargeId: number;
  /** The provider's charge. */
  providerChargeId: string;
  /** The job that charged. */
  chargedByJobId: string;
  /** `true` when this run took the order over from a worker that died mid-job. */
  takeover: boolean;
}
