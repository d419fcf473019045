import { InjectQueue } from '@nestjs/bullmq';
import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  HttpStatus,
  Param,
  ParseIntPipe,
  Post,
} from '@nestjs/common';
import type { Queue } from 'bullmq';
import { CHARGE_CUSTOMER_JOB, CHARGES_QUEUE, type ChargeCustomerData } from './charge-customer.job.js';
import type { Charge } from './charge.entity.js';
import { ChargesService } from './charges.service.js';

@Controller()
export class ChargesController {
  constructor(
    @InjectQueue(CHARGES_QUEUE) private readonly queue: Queue<ChargeCustomerData>,
    private readonly charges: ChargesService,
  ) {}

  /** Enqueues ChargeCustomerJob for the order (body `{ customerId, amountCents }`). */
  @Post('orders/:orderId/charge')
  @HttpCode(HttpStatus.ACCEPTED)
  async charge(
    @Param('orderId', ParseIntPipe) orderId: number,
    @Body() body: Partial<ChargeCustomerData> | undefined,
  ): Promise<{ status: 'enqueued'; jobId: string }> {
    const { customerId, amountCents } = body ?? {};
    if (typeof customerId !== 'string' || !Number.isInteger(amountCents)) {
      throw new BadRequestException('body must be { customerId: string, amountCents: integer }');
    }
    const job = await this.queue.add(CHARGE_CUSTOMER_JOB, { orderId, customerId, amountCents: amountCents! });
    return { status: 'enqueued', jobId: job.id! };
  }

  /** Our charges. */
  @Get('charges')
  async list(): Promise<{ charges: Charge[] }> {
    return { charges: await this.charges.list() };
  }
}
