// What the benches share: counting the Redis commands this process sends, CPU per operation (this process, the Redis
// server and, when it runs on this machine, the PostgreSQL server), timed runs of operations with a number in
// flight, and medians of interleaved rounds.
import { readdirSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { Redis } from 'ioredis';

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
export const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

/**
 * Every command this process sends (ioredis `sendCommand`): `total`, and per connection name (clients created with
 * `connectionName`) a count per command. Counted on the client side: the figure does not drift with machine load.
 */
export const sent = { total: 0, writes: 0, byConnection: new Map() };
const originalSendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function (command, ...rest) {
  sent.total++;
  const name = this.options?.connectionName;
  if (name) {
    let counts = sent.byConnection.get(name);
    if (!counts) sent.byConnection.set(name, (counts = new Map()));
    counts.set(command.name, (counts.get(command.name) ?? 0) + 1);
  }
  return originalSendCommand.call(this, command, ...rest);
};

/**
 * Every socket write this process makes (`writes`: one per `_write` or `_writev` of a socket, to Redis or PostgreSQL),
 * a system call each: several commands corked together go out in one. Stable like the command count.
 */
const { _write: socketWrite, _writev: socketWritev } = Socket.prototype;
Socket.prototype._write = function (...args) {
  sent.writes++;
  return socketWrite.apply(this, args);
};
Socket.prototype._writev = function (...args) {
  sent.writes++;
  return socketWritev.apply(this, args);
};

/** The commands one named connection sent since the last call (by command name), and resets its counts. */
export function takeCommands(connectionName) {
  const counts = Object.fromEntries(sent.byConnection.get(connectionName) ?? []);
  sent.byConnection.delete(connectionName);
  return counts;
}

/** The Redis server's CPU time so far (`INFO cpu`: used_cpu_user + used_cpu_sys), in µs. Server-wide. */
export async function redisCpuMicros(client) {
  const info = await client.info('cpu');
  const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)[1]);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/**
 * The CPU time so far of every process of the PostgreSQL server `pool` reaches (its postmaster's children: backends,
 * WAL writer, checkpointer…, and those that exited), in µs, read from /proc; `undefined` when the server is not a
 * process of this machine (or not Linux). In steps of a 10 ms tick of all the processes together: over a few hundred
 * operations, coarse.
 */
export async function postgresCpuReader(pool) {
  const readStat = (pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return {
        command: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
        parent: Number(fields[1]),
        ticks: Number(fields[11]) + Number(fields[12]),
        exitedChildren: Number(fields[13]) + Number(fields[14]), // cutime + cstime: children waited for
      };
    } catch {
      return undefined;
    }
  };
  const { rows } = await pool.query('SELECT pg_backend_pid() AS pid');
  const backend = readStat(rows[0].pid);
  if (backend?.command !== 'postgres') return undefined;
  const postmaster = backend.parent;
  const microsPerTick = 1e6 / 100; // USER_HZ: 100 on Linux
  return () => {
    let ticks = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = readStat(entry);
      if (stat?.parent === postmaster) ticks += stat.ticks;
      // The postmaster's own time and that of its children which exited (a backend, an autovacuum worker).
      if (Number(entry) === postmaster && stat) ticks += stat.ticks + stat.exitedChildren;
    }
    return ticks * microsPerTick;
  };
}

/**
 * Starts a CPU meter: the returned function gives µs per operation of this process and of Redis for `n` operations,
 * and of PostgreSQL when given its reader ({@link postgresCpuReader}).
 */
export async function cpuMeter(client, postgresCpu) {
  // The servers first: reading them costs this process CPU (INFO, a scan of /proc) that is not the operations'.
  const redisBefore = await redisCpuMicros(client);
  const postgresBefore = postgresCpu?.();
  const node = process.cpuUsage();
  return async (n) => {
    const used = process.cpuUsage(node);
    return {
      nodeUsPerOp: (used.user + used.system) / n,
      redisUsPerOp: ((await redisCpuMicros(client)) - redisBefore) / n,
      ...(postgresCpu ? { postgresUsPerOp: (postgresCpu() - postgresBefore) / n } : {}),
    };
  };
}

/** The variants of a round, in reverse order every other round so position effects (warm-up, GC) cancel. */
export const inRoundOrder = (variants, round) =>
  round % 2 ? Object.entries(variants).reverse() : Object.entries(variants);

/**
 * Runs `n` operations with `inFlight` at a time; returns ops/s, commands and socket writes per op, CPU/op and per-op
 * latencies (ms).
 */
export async function measure(n, inFlight, op, cpuClient) {
  let next = 0;
  const latencies = [];
  const cpu = await cpuMeter(cpuClient);
  const before = sent.total;
  const writesBefore = sent.writes;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) {
        const i = next++;
        const s = performance.now();
        await op(i);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const writesPerOp = (sent.writes - writesBefore) / n;
  return { rate: n / seconds, commandsPerOp: (sent.total - before) / n, writesPerOp, ...(await cpu(n)), latencies };
}

/** Per variant: median rate, median ratio to `baseline` in the same round, commands, CPU and latency percentiles. */
export function summarize(rounds, baseline) {
  const out = {};
  const med = (samples, field) => median(samples.map((s) => s[field]));
  for (const [name, samples] of Object.entries(rounds)) {
    const ratios = samples.map((s, i) => s.rate / rounds[baseline][i].rate);
    const latencies = samples.flatMap((s) => s.latencies);
    out[name] = {
      rate: Math.round(med(samples, 'rate')),
      ratio: Number(median(ratios).toFixed(3)),
      commandsPerOp: Number(med(samples, 'commandsPerOp').toFixed(2)),
      writesPerOp: Number(med(samples, 'writesPerOp').toFixed(2)),
      nodeUsPerOp: Number(med(samples, 'nodeUsPerOp').toFixed(1)),
      redisUsPerOp: Number(med(samples, 'redisUsPerOp').toFixed(1)),
      ...(samples[0].sqlPerOp ? { sqlPerOp: Number(med(samples, 'sqlPerOp').toFixed(2)) } : {}),
      ...(samples[0].postgresUsPerOp !== undefined
        ? { postgresUsPerOp: Number(med(samples, 'postgresUsPerOp').toFixed(1)) }
        : {}),
      extraCommandsPerOp: Number((med(samples, 'commandsPerOp') - med(rounds[baseline], 'commandsPerOp')).toFixed(2)),
      ...(latencies.length
        ? { p50ms: Number(percentile(latencies, 50).toFixed(3)), p99ms: Number(percentile(latencies, 99).toFixed(3)) }
        : {}),
    };
  }
  return out;
}

/** Deletes every key matching `pattern` (SCAN + UNLINK in batches); resolves how many. */
export async function deleteMatching(client, pattern) {
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 10_000);
    cursor = next;
    for (let i = 0; i < keys.length; i += 1000) deleted += await client.unlink(...keys.slice(i, i + 1000));
  } while (cursor !== '0');
  return deleted;
}
