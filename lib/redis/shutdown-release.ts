import type { Cluster, Redis } from 'ioredis';
import type { LoggerLike } from '../common/logger.js';
import { LivenessProbes } from './liveness-probes.js';

type Client = Redis | Cluster;

/** How often the shutdown looks at its connections, and for how long at most. */
const POLL_MS = 100;
const WATCH_MS = 10 * 60_000;

/**
 * Makes sure the application's shutdown ends whatever Redis does meanwhile. Closing BullMQ's queues, workers and
 * queue-events listeners waits for Redis: their `QUIT` is queued behind the commands ioredis keeps while it reconnects.
 * From the start of the shutdown, every `POLL_MS`, over the `clients` known (each with its `host:port`):
 *
 * - a client that stays out of reach for `timeoutMs` (counted from the start of the shutdown, or of its server's
 *   outage if that is later, else from when this client was first seen down) is disconnected, which fails what it had
 *   queued ("Connection is closed"); one log line per server. `false`: never (BullMQ's own behaviour);
 * - so is every client of a server that keeps its connections but stops answering: connected clients that run no
 *   blocking command (`probeable`) are sent `PING`s ({@link LivenessProbes}), and a server that has left one
 *   unanswered for `timeoutMs`, none of its probes answered since, is let go the same way (ioredis destroys a socket the
 *   server does not close after its `disconnectTimeout`, 2 s by default). A server that answers any probe, however
 *   slowly, is never let go: a server with no probeable client is not probed; nor is a silent one while a processor's
 *   code still runs, or ran less than `timeoutMs` ago (then nothing waits for the server yet, and one that stalled
 *   answers again before that code ends);
 * - a client left half-closed is closed for good, at once and whatever `timeoutMs`: ioredis' `disconnect()` between
 *   two reconnection attempts only cancels the next attempt, so the client never reconnects nor ends, and a BullMQ
 *   close waiting for its `end` waits forever (BullMQ disconnects blocking connections that way). One more connection
 *   attempt, then a disconnect, ends it as a manual close whether the server is back or not.
 *
 * A client that comes back in time closes as usual. Stops once every client has ended (or after `WATCH_MS`); its
 * timer never keeps the process alive.
 */
export function releaseAtShutdown(
  clients: ReadonlyMap<Client, string>,
  outageSince: (endpoint: string) => number | undefined,
  silence: {
    /** Whether a client runs no blocking command (a `PING` on it is answered at once when its server is alive). */
    probeable: (client: Client) => boolean;
    /**
     * Whether a processor's code still runs: a silent server is let go only once none has run for `timeoutMs` (a
     * server stalled for a while, a disk or fork stall, answers again before a long handler ends, and its job is then
     * recorded).
     */
    handlersRunning: () => boolean;
  },
  logger: LoggerLike,
  timeoutMs: number | false,
  /** Called when the first connection of a server is let go. */
  onLetGo: (endpoint: string) => void = () => undefined,
): void {
  if (clients.size === 0) return;
  const startedAt = Date.now();
  const downSince = new Map<Client, number>();
  const finishing = new WeakSet<Client>();
  const given = new Set<string>();
  const probes = new LivenessProbes();
  /** Connected clients of a silent server disconnected, until they end. */
  const closing = new WeakSet<Client>();
  let silentBefore = new Set<string>();
  /** When a processor's code was last seen running (the start of the shutdown if never). */
  let runningAt = startedAt;
  const timer = setInterval(() => {
    const now = Date.now();
    if (silence.handlersRunning()) runningAt = now;
    // A server that stalled while a handler ran is judged on its silence once none runs, for a whole `timeoutMs`: the
    // answers to the probes it received while stalled, sent as it resumes, are read by then (at the handler's end,
    // often the moment the server resumed, they may still be on their way).
    const handlersQuiet = now - runningAt >= (timeoutMs === false ? 0 : timeoutMs);
    // Silent at two looks in a row: after an event-loop stall, timers run before the answers that came meanwhile are
    // read, so one look alone could blame a server that did answer.
    const seen = timeoutMs === false ? new Set<string>() : probes.silent(timeoutMs);
    const silent = new Set([...seen].filter((endpoint) => silentBefore.has(endpoint)));
    silentBefore = seen;
    let open = 0;
    for (const [client, endpoint] of clients) {
      if (client.status === 'end') continue;
      open++;
      if (halfClosed(client)) {
        if (!finishing.has(client)) finishClosing(client, finishing);
        continue;
      }
      // `wait`: never used (lazy), nothing is queued on it.
      if (client.status === 'wait') {
        downSince.delete(client);
        continue;
      }
      if (isConnected(client)) {
        downSince.delete(client);
        if (timeoutMs === false) continue;
        if (silence.probeable(client)) probes.send(client, endpoint);
        // Disconnected once: its socket closes within ioredis' `disconnectTimeout` (each call would add a timer).
        if (!silent.has(endpoint) || closing.has(client) || !handlersQuiet) continue;
        closing.add(client);
        client.once('end', () => closing.delete(client));
      } else {
        if (!downSince.has(client)) downSince.set(client, now);
        if (timeoutMs === false) continue;
        const from = Math.max(startedAt, outageSince(endpoint) ?? downSince.get(client)!);
        if (now - from < timeoutMs) continue;
      }
      client.disconnect(); // half-closed now if it was between two attempts: finished at the next look
      if (given.has(endpoint)) continue;
      given.add(endpoint);
      onLetGo(endpoint);
      logger.error(
        silent.has(endpoint)
          ? `Redis ${endpoint} does not answer at shutdown (connected, no answer to PING for ${timeoutMs} ms: shutdownTimeout): closed its connections; jobs still active on them come back as stalled, unless the server resumes and carries out what they had sent`
          : `Redis ${endpoint} is unreachable at shutdown: closed its connections after waiting ${timeoutMs} ms (shutdownTimeout); jobs still active on them were not recorded and come back as stalled`,
      );
    }
    if (open === 0 || now - startedAt >= WATCH_MS) clearInterval(timer);
  }, POLL_MS);
  timer.unref();
}

/** Connected and usable (a Cluster reports `connect` once its nodes are reachable). */
function isConnected(client: Client): boolean {
  return (
    client.status === 'ready' || (client.status === 'connect' && (client as { isCluster?: boolean }).isCluster === true)
  );
}

/**
 * A standalone client told to disconnect while it waited to reconnect: `manuallyClosing` set, no reconnection
 * scheduled (ioredis internals, read defensively: absent fields mean "not half-closed").
 */
function halfClosed(client: Client): boolean {
  const state = client as unknown as { isCluster?: boolean; manuallyClosing?: unknown; reconnectTimeout?: unknown };
  return (
    client.status === 'reconnecting' &&
    state.isCluster !== true &&
    state.manuallyClosing === true &&
    (state.reconnectTimeout === null || state.reconnectTimeout === undefined)
  );
}

/** Ends a half-closed client: one more attempt, which ends as a manual close (refused, or connected then disconnected). */
function finishClosing(client: Client, finishing: WeakSet<Client>): void {
  finishing.add(client);
  void client.connect().then(
    () => client.disconnect(),
    () => undefined,
  );
}
