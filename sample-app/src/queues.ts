import { BullModule } from '@nestjs/bullmq';
import { CHARGES_QUEUE } from './charges/charge-customer.job.js';
import { config, redisConnection } from './config.js';
import { PAYMENTS_QUEUE } from './payments/settle-payment.job.js';

/** Redis and the two queues: the API enqueues on them, the worker processes them. */
export const queueModules = [
  BullModule.forRoot({ connection: redisConnection(), prefix: config.queuePrefix }),
  BullModule.registerQueue({ name: PAYMENTS_QUEUE }, { name: CHARGES_QUEUE }),
];
