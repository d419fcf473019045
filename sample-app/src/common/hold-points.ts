import { Injectable } from '@nestjs/common';
import { createInterface } from 'node:readline';

/**
 * Demo instrumentation, inert in normal runs: lets `npm run demo` stop a job at an exact point, so that its scenarios
 * never depend on timing (re-deliver an event while its job is working; kill the worker after the provider charged).
 *
 * `SAMPLE_HOLD_POINTS=settle:evt_123,charge:48213` arms points; the first job to reach an armed point prints
 * `{"held":"<point>", ...details}` and waits until the line `release <point>` arrives on stdin (or the process is
 * killed).
 */
@Injectable()
export class HoldPoints {
  private readonly armed = new Set((process.env.SAMPLE_HOLD_POINTS ?? '').split(',').filter(Boolean));
  private readonly waiting = new Map<string, () => void>();

  constructor() {
    if (this.armed.size === 0) return;
    createInterface({ input: process.stdin }).on('line', (line) => {
      const [command, point] = line.trim().split(' ');
      if (command === 'release') this.waiting.get(point)?.();
    });
  }

  /**
   * Returns at once, unless `point` is armed: then holds this job (once) until the point is released. `details` go into
   * the line it prints.
   */
  async reach(point: string, details: Record<string, unknown> = {}): Promise<void> {
    if (!this.armed.delete(point)) return;
    await new Promise<void>((resolve) => {
      this.waiting.set(point, resolve);
      console.log(JSON.stringify({ ...details, held: point }));
    });
    this.waiting.delete(point);
  }
}
