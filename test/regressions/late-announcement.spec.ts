// A delivery waiting for an idempotency key announces itself on a Redis channel, then looks at the record once more
// and promotes itself if the holder settled it meanwhile. When its look came before the settle and its announcement
// reached the holder's process after it (the channel slower than the store), nobody woke it: it waited for the
// holder's whole lease. Seen in CI as a step job's own next delivery (SQL store, concurrency 2) that met its claim a
// moment before the step handed it over, then waited 30 s. The holder's process now remembers the keys it settled in
// the last 2 s and wakes a delivery announced for one of them at once.
import { describe, expect, it } from '@jest/globals';
import { useWaitingChannel } from '../support/waiting-channel.js';
import { queueEvent } from '../support/wait.js';

describe('a waiting delivery announced just after its holder settled the key', () => {
  const channel = useWaitingChannel('late-announcement');

  it('is woken at once by the process that settled the key, not after the lease', async () => {
    const recordId = 'record-1';
    // The waiting delivery, delayed for the holder's lease (ten minutes).
    const waiting = await channel.queue.add('charge', {}, { delay: 10 * 60_000 });
    channel.holder.holding(recordId, channel.queue);
    channel.holder.settled(recordId); // no waiter announced yet: nobody to wake
    const promoted = queueEvent(channel.queueEvents, 'waiting', waiting.id!);
    await channel.announcer.announce({ recordId, queue: channel.queue.qualifiedName, jobId: waiting.id });
    await promoted;
    expect(await channel.queue.getJobState(waiting.id!)).toBe('waiting');
  });

  it('leaves a delivery announced for a key settled long ago (or never held here) to its delay', async () => {
    const waiting = await channel.queue.add('charge', {}, { delay: 10 * 60_000 });
    await channel.announcer.announce({
      recordId: 'record-never-held',
      queue: channel.queue.qualifiedName,
      jobId: waiting.id,
    });
    // The announcement is handled before this process's next message on the channel: one sent after it.
    const heardAfter = channel.queue.add('charge', {}, { delay: 10 * 60_000 });
    channel.holder.holding('record-2', channel.queue);
    channel.holder.settled('record-2');
    const marker = await heardAfter;
    const promoted = queueEvent(channel.queueEvents, 'waiting', marker.id!);
    await channel.announcer.announce({ recordId: 'record-2', queue: channel.queue.qualifiedName, jobId: marker.id });
    await promoted;
    expect(await channel.queue.getJobState(waiting.id!)).toBe('delayed');
  });
});
