import type { AdminJobView, AdminLockDetail } from '../interfaces/admin-views.interface.js';
import { DEAD_SET_SEARCH, MAX_OWNER_JOBS } from '../lock-detail.js';
import { formatDuration, formatTime, jsonBlock, stateBadge } from './format.js';
import { adminUrl, html, type SafeHtml } from './html.js';
import { layout, type Notice, type PageContext } from './layout.view.js';
import { lockKindLabel, ownersCell, releaseForm } from './locks.view.js';
import { deadEntriesTable } from './dead-set.view.js';
import { cutText, logBlock, MAX_NAME, MAX_REASON, shortened } from './text.js';

function jobSection(job: AdminJobView): SafeHtml {
  if (!job.found) {
    return html`<div class="card job" data-job-id="${shortened(job.id)}">
      <h3>Job <code>${cutText(job.id, MAX_NAME)}</code> ${stateBadge('missing')}</h3>
      ${
        job.queueTag
          ? html`<p>
              Its run-time lock names a queue this page neither inspects nor finds in the library's queue registry (tag
              <code>${shortened(job.queueTag)}</code>): the job may be alive there. The reaper looks for it there before
              releasing the lock; release it by hand only once you know that job is gone.
            </p>`
          : html`<p>
              No job with this id
              exists${job.queue ? html` in queue <b>${shortened(job.queue)}</b>` : ' in the inspected queues'}: the lock
              outlived its job (an orphan). Release it, or let the reaper do it.
            </p>`
      }
    </div>`;
  }
  return html`<div class="card job" data-job-id="${shortened(job.id)}">
    <h3>Job <code>${cutText(job.id, MAX_NAME)}</code> ${stateBadge(job.state)}</h3>
    <dl>
      <dt>Queue</dt>
      <dd>${job.queue === undefined ? '' : shortened(job.queue)}</dd>
      <dt>Name</dt>
      <dd class="job-name">${cutText(job.name, MAX_NAME)}</dd>
      <dt>Attempts made</dt>
      <dd>${job.attemptsMade}</dd>
      ${
        job.failedReason
          ? html`<dt>Failed reason</dt>
              <dd class="failed-reason">${cutText(job.failedReason, MAX_REASON)}</dd>`
          : ''
      }
    </dl>
    <h3>History</h3>
    <table class="timeline">
      <thead>
        <tr>
          <th>When</th>
          <th>Event</th>
          <th>Detail</th>
        </tr>
      </thead>
      <tbody>
        ${job.timeline.map(
          (event) =>
            html`<tr>
              <td>${formatTime(event.at)}</td>
              <td>${event.event}</td>
              <td>${cutText(event.detail, MAX_REASON)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    <h3>Data</h3>
    ${jsonBlock(job.data)}
    <h3>Options</h3>
    ${jsonBlock(job.opts)}
    ${
      job.returnValue !== undefined
        ? html`<h3>Return value</h3>
            ${jsonBlock(job.returnValue)}`
        : ''
    }
    ${
      job.logs.length
        ? html`<h3>Logs</h3>
            ${logBlock(job.logs)}`
        : ''
    }
  </div>`;
}

/** The newest rejected duplicates of the digest, how many there are, and where to see them all. */
function rejectedSection(context: PageContext, detail: AdminLockDetail): SafeHtml {
  const { rejected, rejectedTotal: total, rejectedSearched: searched } = detail;
  const where =
    `found in the newest ${searched} entries of the dead set` +
    (searched >= DEAD_SET_SEARCH ? ' (older entries were not searched)' : '');
  if (rejected.length === 0) return html`<p class="muted">None ${where}.</p>`;
  const shown = rejected.length < total ? `The newest ${rejected.length} of ${total}` : `${total}`;
  const count = `${shown} rejected duplicate${total === 1 ? '' : 's'} of this digest, ${where}.`;
  return html`<p class="muted rejected-count">
      ${count} <a href="${adminUrl(context.base, ['dead'])}">All rejected duplicates</a>
    </p>
    ${deadEntriesTable(context, rejected)}`;
}

/** A lock opened: its keys (each releasable), its owner jobs with their history, its rejected duplicates. */
export function lockPage(context: PageContext, detail: AdminLockDetail, notice?: Notice): SafeHtml {
  const keys = detail.locks.map(
    (lock) =>
      html`<tr>
        <td class="mono">${lock.key}</td>
        <td>${lockKindLabel(lock)}</td>
        <td class="queue">${lock.queue ?? html`<span class="muted">—</span>`}</td>
        <td>${ownersCell(lock)}</td>
        <td>${lock.ttlMs === undefined ? html`<span class="muted">none</span>` : formatDuration(lock.ttlMs)}</td>
        <td>${releaseForm(context, detail.digest, lock.kind, 'detail')}</td>
      </tr>`,
  );
  const content = html`<p><a href="${adminUrl(context.base)}">← All locks</a></p>
    <div class="card">
      <dl>
        <dt>Digest</dt>
        <dd class="mono" id="digest">${detail.digest}</dd>
      </dl>
    </div>
    <h3>Keys</h3>
    ${
      keys.length
        ? html`<table id="keys">
              <thead>
                <tr>
                  <th>Redis key</th>
                  <th>Lock</th>
                  <th>Queue</th>
                  <th>Owner job</th>
                  <th>TTL</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                ${keys}
              </tbody>
            </table>
            <p>
              ${releaseForm(context, detail.digest, undefined, 'detail')}
              <span class="muted">deletes every key of this digest; the owner job keeps running.</span>
            </p>`
        : html`<p class="muted">This digest holds no lock now.</p>`
    }
    <h3>Owner jobs</h3>
    ${detail.jobs.length ? detail.jobs.map(jobSection) : html`<p class="muted">No owner.</p>`}
    ${
      detail.moreOwners
        ? html`<p class="muted more-owners">
            +${detail.moreOwners} more holders, whose jobs are not shown: this page loads ${MAX_OWNER_JOBS} owner jobs
            at most (a job holding two keys of the digest counts in each).
          </p>`
        : ''
    }
    <h3>Rejected duplicates of this digest</h3>
    ${rejectedSection(context, detail)}`;
  return layout(context, 'locks', `Lock ${detail.digest}`, content, notice);
}
