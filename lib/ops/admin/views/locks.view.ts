import type { HeldLock, LockCounts, LockPage } from '../../inspection/lock-inspection.interface.js';
import { formatDuration, formatTime, shortDigest, stateBadge } from './format.js';
import { adminUrl, html, type SafeHtml } from './html.js';
import { countsStrip, csrfField, layout, type Notice, type PageContext } from './layout.view.js';
import { shortened } from './text.js';

/** The filter of the locks page, as typed (redisplayed in the form). */
export interface LocksQuery {
  digest?: string;
  /** A glob over digests (`*`, `?`). */
  pattern?: string;
  kind?: string;
  queue?: string;
  jobId?: string;
  cursor?: string;
  limit: number;
}

const STORAGE: Readonly<Record<string, string>> = {
  deduplication: 'BullMQ deduplication key',
  queued: 'queued set',
  expiring: 'expiring set (until_expired)',
  running: 'running set',
};

/** How a lock is held, in words. */
export function lockKindLabel(lock: HeldLock): SafeHtml {
  return html`<span class="kind">${lock.kind === 'enqueue' ? 'enqueue' : 'run-time'}</span><br /><span class="muted"
      >${STORAGE[lock.storage] ?? lock.storage}</span
    >`;
}

/** The owners of a lock: job id, name, state, since (at most 20, then how many more hold it). */
export function ownersCell(lock: HeldLock): SafeHtml {
  if (lock.owners.length === 0) return html`<span class="muted">none</span>`;
  return html`<div class="owners">
    ${lock.owners.map(
      (owner) =>
        html`<div>
          <code class="job-id">${shortened(owner.jobId)}</code>
          ${owner.jobName !== undefined ? html`<span class="job-name">${shortened(owner.jobName)}</span>` : ''}
          ${stateBadge(owner.jobState)}${owner.leaseExpiresAt !== undefined ? html`<br /><span class="muted">lease ends </span>${formatTime(owner.leaseExpiresAt)}` : ''}
        </div>`,
    )}
    ${lock.moreOwners ? html`<div class="muted more-owners">+${lock.moreOwners} more</div>` : ''}
  </div>`;
}

/** The release button of one lock key (or of every key of the digest when `kind` is undefined). */
export function releaseForm(
  context: PageContext,
  digest: string,
  kind: HeldLock['kind'] | undefined,
  from: 'list' | 'detail',
): SafeHtml {
  return html`<form class="inline" method="post" action="${adminUrl(context.base, ['locks', digest, 'release'])}">
    ${csrfField(context)}${kind ? html`<input type="hidden" name="kind" value="${kind}" />` : ''}<input
      type="hidden"
      name="from"
      value="${from}"
    /><button type="submit" class="danger" data-release="${digest}">Release${kind ? '' : ' all'}</button>
  </form>`;
}

/** The locks page: counts, filter, one page of held locks. */
export function locksPage(
  context: PageContext,
  counts: LockCounts,
  page: LockPage,
  query: LocksQuery,
  queues: readonly string[],
  notice?: Notice,
): SafeHtml {
  const base = context.base;
  const filterParams = {
    digest: query.digest || undefined,
    pattern: query.pattern || undefined,
    kind: query.kind || undefined,
    queue: query.queue || undefined,
    jobId: query.jobId || undefined,
    limit: query.limit,
  };
  const rows = page.locks.map((lock) => {
    const since = lock.owners.map((owner) => owner.since).filter((t): t is number => t !== undefined);
    return html`<tr data-digest="${lock.digest}">
      <td class="digest">
        <a href="${adminUrl(base, ['locks', lock.digest])}" title="${lock.digest}">${shortDigest(lock.digest)}</a>
      </td>
      <td>${lockKindLabel(lock)}</td>
      <td class="queue">${lock.queue ?? html`<span class="muted">—</span>`}</td>
      <td>${ownersCell(lock)}</td>
      <td>${since.length ? formatTime(Math.min(...since)) : html`<span class="muted">—</span>`}</td>
      <td class="ttl">
        ${lock.ttlMs === undefined ? html`<span class="muted">none</span>` : formatDuration(lock.ttlMs)}
      </td>
      <td>${releaseForm(context, lock.digest, lock.kind, 'list')}</td>
    </tr>`;
  });
  const content = html`${countsStrip(counts)}
    <div class="card">
      <form class="filters" method="get" action="${adminUrl(base)}">
        <label
          >Digest prefix<input
            name="digest"
            value="${query.digest}"
            placeholder="v1:ab12…"
            class="wide"
            autocomplete="off"
        /></label>
        <label
          >Digest glob<input name="pattern" value="${query.pattern}" placeholder="*ab12?c*" autocomplete="off"
        /></label>
        <label
          >Kind<select name="kind">
            <option value="">any</option>
            <option value="enqueue" ${query.kind === 'enqueue' ? html` selected` : ''}>enqueue</option>
            <option value="runtime" ${query.kind === 'runtime' ? html` selected` : ''}>run-time</option>
          </select></label
        >
        <label
          >Queue<select name="queue">
            <option value="">any</option>
            ${queues.map(
              (name) => html`<option value="${name}" ${query.queue === name ? html` selected` : ''}>${name}</option>`,
            )}
          </select></label
        >
        <label>Owner job id<input name="jobId" value="${query.jobId}" autocomplete="off" /></label>
        <label>Per page<input name="limit" type="number" min="1" max="500" value="${query.limit}" /></label>
        <button type="submit" class="primary">Filter</button>
        <a href="${adminUrl(base)}">Reset</a>
      </form>
    </div>
    <table id="locks">
      <thead>
        <tr>
          <th>Digest</th>
          <th>Lock</th>
          <th>Queue</th>
          <th>Owner job</th>
          <th>Since</th>
          <th>TTL</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${
          rows.length
            ? rows
            : html`<tr>
                <td colspan="7" class="muted">No locks on this page.</td>
              </tr>`
        }
      </tbody>
    </table>
    <div class="pager">
      ${query.cursor && query.cursor !== '0' ? html`<a href="${adminUrl(base, [], filterParams)}">First page</a>` : ''}
      ${page.cursor !== '0' ? html`<a rel="next" href="${adminUrl(base, [], { ...filterParams, cursor: page.cursor })}">Next page →</a>` : html`<span class="muted">End of the list.</span>`}
    </div>`;
  return layout(context, 'locks', 'Locks', content, notice);
}
