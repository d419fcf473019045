import 'reflect-metadata';
import type { Server } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { ApiModule } from './api.module.js';
import { ChargeCustomerProcessor } from './charges/charge-customer.processor.js';
import { config } from './config.js';
import { SettlePaymentProcessor } from './payments/settle-payment.processor.js';
import { WorkerModule } from './worker.module.js';

/**
 * Starts one role of the sample: `ROLE=api` (the default) serves HTTP on `PORT`, `ROLE=worker` runs the processors.
 * Run one API and any number of workers. Each prints one JSON line once it is ready (`{"ready":"api","url":…}` or
 * `{"ready":"worker"}`), for the demo and for process managers; SIGTERM shuts it down gracefully.
 */
async function bootstrap(): Promise<void> {
  if (config.role === 'worker') {
    const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error', 'warn'] });
    app.enableShutdownHooks();
    await Promise.all([
      app.get(SettlePaymentProcessor).worker.waitUntilReady(),
      app.get(ChargeCustomerProcessor).worker.waitUntilReady(),
    ]);
    console.log(JSON.stringify({ ready: 'worker', pid: process.pid }));
    return;
  }
  if (config.role !== 'api') throw new Error(`ROLE must be api or worker, got "${config.role}"`);
  const app = await NestFactory.create(ApiModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  // Idle keep-alive connections stay open longer than a client keeps them (Node's fetch: 4 s), so the server never
  // closes one under a request the client is sending on it (`other side closed` under load).
  const server = app.getHttpServer() as Server;
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await app.listen(config.port, '127.0.0.1');
  console.log(JSON.stringify({ ready: 'api', url: await app.getUrl() }));
}

bootstrap().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
