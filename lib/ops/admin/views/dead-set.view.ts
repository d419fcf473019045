import type { DeadSetEntry } from '../../../dead-set/dead-set-entry.interface.js';
import type { AdminDeadSetPage } from '../interfaces/admin-views.interface.js';
import { formatTime, jsonBlock, shortDigest } from './format.js';
import { adminUrl, html, type SafeHtml } from './html.js';
import { countsStrip, csrfField, layout, type Notice, type PageContext } from './layout.view.js';
import type { LockCounts } from '../../inspection/lock-inspection.interface.js';
import { entryQueueLabel } from '../../../dead-set/entry-queue.js';
import { cutText, MAX_NAME, MAX_REASON, shortened } from './text.js';

function actionForm(context: PageContext, entry: DeadSetEntry, action: 'retry' | 'delete'): SafeHtml {
  return html`<form class="inline" method="post" action="${adminUrl(context.base, ['dead', entry.id, action])}">
    ${csrfField(context)}<button
      type="submit"
      class="${action === 'delete' ? 'danger' : ''}"
      data-${action}="${entry.id}"
    >
      ${action === 'retry' ? 'Retry' : 'Delete'}
    </button>
  </form>`;
}

/** Rejected duplicates as a table, each with its retry and delete buttons. */
export function deadEntriesTable(context: PageContext, entries: readonly DeadSetEntry[]): SafeHtml {
  return html`<table class="dead">
    <thead>
      <tr>
        <th>Rejected</th>
        <th>Queue / job</th>
        <th>Lock</th>
        <th>Why</th>
        <th>Data</th>
        <th></th>
      </tr>
    </thead>
    <tbody>
      ${entries.map(
        (entry) =>
          html`<tr data-entry="${entry.id}">
            <td>
              ${formatTime(entry.rejectedAt)}<br /><span class="muted"
                >${entry.side === 'client' ? 'at enqueue' : 'in the worker'}</span
              >
            </td>
            <td class="wrap">
              ${shortened(entryQueueLabel(entry))}<br /><span class="job-name">${cutText(entry.jobName, MAX_NAME)}</span
              >${entry.jobId ? html`<br /><code>${shortened(entry.jobId)}</code>` : ''}
            </td>
            <td class="lockref">
              <a href="${adminUrl(context.base, ['locks', shortened(entry.digest)])}" title="${shortened(entry.digest)}"
                >${shortDigest(entry.digest)}</a
              >${entry.existingJobId ? html`<br /><span class="muted">held by </span><code>${shortened(entry.existingJobId)}</code>` : ''}
            </td>
            <td class="reason">${cutText(entry.reason, MAX_REASON)}</td>
            <td class="data">
              ${
                entry.truncated
                  ? html`<span class="muted"
                      >Not stored: ${String(entry.originalBytes ?? '?')} bytes, over deadSet.maxEntryBytes (sha256
                      <code>${entry.payloadSha256 ?? '?'}</code>); cannot be retried</span
                    >`
                  : jsonBlock(entry.data)
              }
            </td>
            <td>
              ${entry.truncated ? '' : actionForm(context, entry, 'retry')} ${actionForm(context, entry, 'delete')}
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** The dead-set page: one page of rejected duplicates, newest first. */
export function deadSetPage(
  context: PageContext,
  counts: LockCounts,
  page: AdminDeadSetPage,
  notice?: Notice,
): SafeHtml {
  const previous = Math.max(0, page.offset - page.limit);
  const next = page.offset + page.limit;
  const content = html`${countsStrip(counts)}
    <p class="muted">
      Duplicates the <code>reject</code> strategy set aside. Retry enqueues one again under the same uniqueness rules
      (it may be a duplicate again); delete drops it.
    </p>
    ${page.entries.length ? deadEntriesTable(context, page.entries) : html`<p class="muted">No rejected duplicates${page.offset > 0 ? ' on this page' : ''}.</p>`}
    <div class="pager">
      ${page.offset > 0 ? html`<a href="${adminUrl(context.base, ['dead'], { offset: previous, limit: page.limit })}">← Previous</a>` : ''}
      ${next < page.total ? html`<a rel="next" href="${adminUrl(context.base, ['dead'], { offset: next, limit: page.limit })}">Next →</a>` : ''}
      <span class="muted"
        >${page.total === 0 ? '' : `${page.offset + 1}–${Math.min(page.total, page.offset + page.entries.length)} of ${page.total}`}</span
      >
    </div>`;
  return layout(context, 'dead', 'Rejected duplicates', content, notice);
}
