// The README leaves PaymentsService to the reader. This one records every call, and holds each settlement until
// main.ts opens its gate: the duplicates are sent while the first job is certainly still queued or running.
import { Injectable } from '@nestjs/common';

@Injectable()
export class PaymentsService {
  /** Event ids, one per call of settle (a duplicate that ran would show twice). */
  readonly calls: string[] = [];
  private open: () => void = () => undefined;
  private readonly gate = new Promise<void>((resolve) => {
    this.open = resolve;
  });

  release(): void {
    this.open();
  }

  async settle(eventId: string): Promise<{ settled: string }> {
    this.calls.push(eventId);
    await this.gate;
    return { settled: eventId };
  }
}
