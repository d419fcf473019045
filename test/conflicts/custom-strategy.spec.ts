import { describe, expect, it } from '@jest/globals';
import type {
  ClientConflict,
  ClientResolution,
  ConflictStrategy,
  ConflictTools,
  ServerConflict,
} from '../../lib/index.js';
import { UniqueJobsError } from '../../lib/index.js';
import { useApps } from '../support/apps.js';
import { EventLog } from '../support/events.js';
import { Gates } from '../support/gates.js';
import { asEnqueued, byId } from '../support/locks.js';
import { clientSide, serverSide } from './helpers.js';

type Data = { id: string; tag: string };

/** Remembers every duplicate it sees; at enqueue drops it (or throws for `tag: 'boom'`), in the worker skips it. */
class AuditStrategy implements ConflictStrategy {
  readonly name = 'audit';
  readonly sides = ['client', 'server'] as const;
  readonly seen: (ClientConflict | ServerConflict)[] = [];

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    this.seen.push(conflict);
    if ((conflict.data as Data).tag === 'boom') throw new UniqueJobsError(`audit refused ${conflict.digest}`);
    tools.logger.warn(`audit: client duplicate of ${conflict.existingJobId}`);
    return {
      result: {
        status: 'duplicate',
        existingJobId: conflict.existingJobId,
        strategy: this.name,
        digest: conflict.digest,
      },
    };
  }

  async onServerConflict(conflict: ServerConflict, tools: ConflictTools): Promise<unknown> {
    this.seen.push(conflict);
    tools.events.emit({
      type: 'duplicate',
      side: 'server',
      strategy: this.name,
      queue: conflict.definition.queue,
      jobName: conflict.job.name,
      digest: conflict.digest,
      existingJobId: conflict.existingJobId,
      jobId: conflict.job.id,
    });
    return { skippedBecause: conflict.existingJobId };
  }
}

/** A client-only strategy that delegates to a built-in one through the tools. */
class DeadLetterStrategy implements ConflictStrategy {
  readonly name = 'dead-letter';
  readonly sides = ['client'] as const;
  calls = 0;

  async onClientConflict(conflict: ClientConflict, tools: ConflictTools): Promise<ClientResolution> {
    this.calls++;
    return tools.strategy('reject').onClientConflict!(conflict, tools);
  }
}

describe('custom conflict strategies (forRoot({ strategies }))', () => {
  const { start, keysOf } = useApps('custom');

  it('client side (until_executed): used by name, receives the conflict, decides the result', async () => {
    const audit = new AuditStrategy();
    const app = await start({
      ...clientSide('audit'),
      module: { strategies: [audit] },
    });
    const first = asEnqueued(await app.service.enqueue(app.queue, 'task', { id: 'a', tag: 'one' }));
    const dup = await app.service.enqueue(app.queue, 'task', { id: 'a', tag: 'two' }, { attempts: 2 });
    expect(dup).toEqual({ status: 'duplicate', strategy: 'audit', existingJobId: first.job.id, digest: first.digest });
    expect(audit.seen).toHaveLength(1);
    expect(audit.seen[0]).toMatchObject({
      side: 'client',
      name: 'task',
      data: { id: 'a', tag: 'two' },
      opts: { attempts: 2 },
      digest: first.digest,
      existingJobId: first.job.id,
    });
    expect((audit.seen[0] as ClientConflict).queue).toBe(app.queue);
    expect(audit.seen[0].definition.options.onConflict).toBe('audit');

    // queue.add with a result and no error returns a handle with the existing job's id.
    const viaAdd = await app.queue.add('task', { id: 'a', tag: 'three' });
    expect(viaAdd.id).toBe(first.job.id);
    // A strategy that throws fails queue.add and the explicit API alike.
    await expect(app.queue.add('task', { id: 'a', tag: 'boom' })).rejects.toThrow(/audit refused/);
    await expect(app.service.enqueue(app.queue, 'task', { id: 'a', tag: 'boom' })).rejects.toThrow(/audit refused/);
    expect(audit.seen).toHaveLength(4);
    expect(await app.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
  });

  it("server side (while_executing): its return value becomes the skipped job's return value", async () => {
    const audit = new AuditStrategy();
    const gates = new Gates().hold('first');
    const app = await start({
      ...serverSide('audit', gates),
      module: { strategies: [audit] },
    });
    const events = new EventLog(app);
    const first = await app.queue.add('task', { id: 'a', tag: 'first' });
    await gates.started('first');
    const second = await app.queue.add('task', { id: 'a', tag: 'second' });
    await expect(app.finished(second)).resolves.toEqual({ skippedBecause: first.id });
    expect(app.runs.map((job) => job.id)).toEqual([first.id]);
    expect(audit.seen).toHaveLength(1);
    const conflict = audit.seen[0] as ServerConflict;
    expect(conflict).toMatchObject({ side: 'server', existingJobId: first.id });
    expect(conflict.job.id).toBe(second.id);
    expect(conflict.token).toEqual(expect.any(String));
    expect(events.of('duplicate')).toEqual([expect.objectContaining({ strategy: 'audit', jobId: second.id })]);

    gates.release('first');
    await app.finished(first);
    expect(await keysOf(app)).toEqual([]);
  });

  it("the definition a strategy receives names each side's strategy as resolved, the lock's default included", async () => {
    const audit = new AuditStrategy();
    const app = await start({
      unique: { lock: 'until_and_while_executing', onConflict: { client: 'audit' }, lockArgs: byId },
      paused: true,
      module: { strategies: [audit] },
    });
    await app.queue.add('task', { id: 'a', tag: 'A' });
    await app.queue.add('task', { id: 'a', tag: 'dup' });
    expect(audit.seen.map((conflict) => conflict.definition.options.onConflict)).toEqual([
      { client: 'audit', server: 'reschedule' }, // server side left unset: until_and_while_executing's default
    ]);
  });

  it('a client-only custom strategy next to a built-in server one, delegating to reject', async () => {
    const deadLetter = new DeadLetterStrategy();
    const gates = new Gates().hold('A');
    const app = await start({
      unique: {
        lock: 'until_and_while_executing',
        onConflict: { client: 'dead-letter', server: 'log' },
        lockArgs: byId,
      },
      handler: gates.handler,
      paused: true,
      module: { strategies: [deadLetter] },
    });
    const a = asEnqueued(await app.service.enqueue(app.queue, 'task', { id: 'a', tag: 'A' }));
    const dup = await app.service.enqueue(app.queue, 'task', { id: 'a', tag: 'dup' });
    expect(dup).toMatchObject({ status: 'duplicate', strategy: 'reject', existingJobId: a.job.id });
    expect(deadLetter.calls).toBe(1);
    expect(await app.service.deadSet.list()).toEqual([
      expect.objectContaining({ side: 'client', data: { id: 'a', tag: 'dup' }, existingJobId: a.job.id }),
    ]);
    app.start();
    await gates.started('A');
    gates.release('A');
    await expect(app.finished(a.job)).resolves.toBe('ran:A');
  });
});
