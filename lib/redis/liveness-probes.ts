import type { Cluster, Redis } from 'ioredis';

type Client = Redis | Cluster;

/** How often a client is probed at most (ms): two `PING`s a second per connection while the shutdown lasts. */
const PROBE_EVERY_MS = 500;

/** A `PING` waiting for its answer: the server it asks, and when it was sent. */
interface Probe {
  endpoint: string;
  sentAt: number;
}

/**
 * Tells a server that keeps its connections open but stops answering (a paused process, a partition that resets
 * nothing) from one that answers, slowly or not: their clients look the same (`ready`), and what they queued waits
 * either way. A `PING` on each connected client the caller knows runs no blocking command (on a connection waiting in
 * `BZPOPMIN` or `XREAD BLOCK`, it would wait behind that command: no sign of an outage), at most one at a time per
 * client and one per `PROBE_EVERY_MS`. Any answer of a server, an error reply included (`BUSY`, `LOADING`: it is
 * there), clears the suspicion of the probes sent before it; a probe that ends without an answer (its connection
 * closed) is forgotten.
 */
export class LivenessProbes {
  private readonly pending = new Map<Client, Probe>();
  private readonly lastSent = new WeakMap<Client, number>();
  /** Per server, when a probe of it last got an answer. */
  private readonly answeredAt = new Map<string, number>();

  /** PINGs `client` (each node of a Cluster in use) unless a probe of it is still waiting, or was sent just now. */
  send(client: Client, endpoint: string): void {
    const now = Date.now();
    if (this.pending.has(client) || now - (this.lastSent.get(client) ?? -Infinity) < PROBE_EVERY_MS) return;
    const probe: Probe = { endpoint, sentAt: now };
    this.pending.set(client, probe);
    this.lastSent.set(client, now);
    void ping(client)
      .then(
        () => this.answered(endpoint),
        (error: unknown) => {
          if ((error as { name?: unknown } | undefined)?.name === 'ReplyError') this.answered(endpoint);
        },
      )
      .finally(() => {
        if (this.pending.get(client) === probe) this.pending.delete(client);
      });
  }

  /**
   * The servers that have left a probe unanswered for `timeoutMs`, none of their probes answered since it was sent:
   * nothing sent to them is answered either.
   */
  silent(timeoutMs: number): Set<string> {
    const now = Date.now();
    const servers = new Set<string>();
    for (const { endpoint, sentAt } of this.pending.values()) {
      if (now - sentAt >= timeoutMs && sentAt > (this.answeredAt.get(endpoint) ?? -1)) servers.add(endpoint);
    }
    return servers;
  }

  private answered(endpoint: string): void {
    this.answeredAt.set(endpoint, Date.now());
  }
}

/** Resolves once the server answers `PING`; for a Cluster, once every master node in use does (each may be silent). */
function ping(client: Client): Promise<unknown> {
  if (!(client as { isCluster?: boolean }).isCluster) return (client as Redis).ping();
  // A node never used (`wait`: ioredis connects nodes lazily) has nothing queued: not worth a connection now.
  const nodes = (client as Cluster).nodes('master').filter((node) => node.status !== 'wait');
  return Promise.all(nodes.map((node) => node.ping()));
}
