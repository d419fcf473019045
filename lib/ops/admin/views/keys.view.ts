import { describeMatch } from '../../../idempotency/stored-key.js';
import type { AdminKeyLookup } from '../interfaces/admin-views.interface.js';
import { formatTime, storedJson } from './format.js';
import { adminUrl, html, type SafeHtml } from './html.js';
import { layout, type Notice, type PageContext } from './layout.view.js';
import { cutText, MAX_NAME } from './text.js';

const RECORD_STATE_CLASS: Readonly<Record<string, string>> = {
  in_progress: 'state-active',
  completed: 'state-completed',
  failed: 'state-failed',
};

/** What was typed in the lookup form. */
export interface KeyQuery {
  store?: string;
  scope?: string;
  key?: string;
}

/** The idempotency key lookup: a form and, after a lookup, the record (state, result, fingerprint). */
export function keysPage(
  context: PageContext,
  stores: readonly string[],
  query: KeyQuery,
  lookup: AdminKeyLookup | undefined,
  notice?: Notice,
): SafeHtml {
  const record = lookup?.record;
  const result = lookup
    ? record
      ? html`<div class="card" id="record">
          <h3>
            <span class="badge ${RECORD_STATE_CLASS[record.state] ?? 'state-unknown'}" id="record-state"
              >${record.state}</span
            >
          </h3>
          <dl>
            <dt>Store</dt>
            <dd>${lookup.store}</dd>
            <dt>Scope</dt>
            <dd class="mono">${record.scope}</dd>
            <dt>Key</dt>
            <dd class="mono">${record.key}</dd>
            <dt>Matched</dt>
            <dd id="matched-as">${describeMatch(lookup.matchedAs)}</dd>
            <dt>Job</dt>
            <dd class="mono">
              ${record.jobId === undefined ? html`<span class="muted">—</span>` : cutText(record.jobId, MAX_NAME)}
            </dd>
            <dt>Fingerprint</dt>
            <dd class="mono">${record.fingerprint ?? html`<span class="muted">none (payloads not compared)</span>`}</dd>
            <dt>Attempts</dt>
            <dd>${record.attempts}</dd>
            <dt>Created</dt>
            <dd>${formatTime(record.createdAt)}</dd>
            <dt>${record.state === 'in_progress' ? 'Lease ends' : 'Kept until'}</dt>
            <dd>${formatTime(record.expiresAt)}</dd>
          </dl>
          ${
            record.state === 'completed'
              ? html`<h3>Result</h3>
                  ${storedJson(record.result)}`
              : ''
          }
          ${
            record.state === 'failed'
              ? html`<h3>Error</h3>
                  ${storedJson(record.error)}`
              : ''
          }
        </div>`
      : html`<div class="card" id="record">
          <p>No live record for this key in store <b>${lookup.store}</b>: the next job with it runs.</p>
        </div>`
    : '';
  const content = html`<div class="card">
      <form class="filters" method="get" action="${adminUrl(context.base, ['keys'])}">
        <label
          >Store<select name="store">
            ${stores.map(
              (name) => html`<option value="${name}" ${query.store === name ? html` selected` : ''}>${name}</option>`,
            )}
          </select></label
        >
        <label
          >Scope<input name="scope" value="${query.scope}" placeholder="queue:jobName" class="wide" required
        /></label>
        <label>Key<input name="key" value="${query.key}" class="wide" required autocomplete="off" /></label>
        <button type="submit" class="primary">Look up</button>
      </form>
      <p class="muted">
        The scope is the <code>scope</code> option of <code>@IdempotencyKey</code>, by default
        <code>&lt;queue&gt;:&lt;job name&gt;</code> (<code>:&lt;prefix&gt;:&lt;queue&gt;:&lt;job name&gt;</code> for a
        queue under a BullMQ prefix other than <code>bull</code>, its <code>%</code> and <code>:</code> written
        <code>%25</code> and <code>%3A</code>).
      </p>
    </div>
    ${result}`;
  return layout(context, 'keys', 'Idempotency keys', content, notice);
}
