import type { LockCounts } from '../../inspection/lock-inspection.interface.js';
import { adminUrl, html, styleSheet, type SafeHtml } from './html.js';
import { ADMIN_CSS } from './styles.js';

/** The sections of the page (the navigation). */
export type AdminSection = 'locks' | 'dead' | 'keys';

/** What every page has. */
export interface PageContext {
  /** The admin's mount path as the browser sees it, e.g. `/admin/unique-jobs`. */
  base: string;
  /** Title of the page (option `title`). */
  title: string;
  /** Nonce of the inline stylesheet (allowed by the CSP). */
  nonce: string;
  /** CSRF token for the page's forms. */
  csrfToken: string;
}

/** A message above the content: done (green) or an error (red). */
export interface Notice {
  text: string;
  error?: boolean;
}

/** The whole HTML document around a section's content. */
export function layout(
  context: PageContext,
  section: AdminSection | undefined,
  heading: string,
  content: SafeHtml,
  notice?: Notice,
): SafeHtml {
  const link = (target: AdminSection, label: string, segments: string[]) =>
    html`<a href="${adminUrl(context.base, segments)}" class="${section === target ? 'active' : ''}">${label}</a>`;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>${heading} · ${context.title}</title>
        <style nonce="${context.nonce}">
          ${styleSheet(ADMIN_CSS)}
        </style>
      </head>
      <body>
        <header>
          <h1>${context.title}</h1>
          <nav>
            ${link('locks', 'Locks', [])}${link('dead', 'Rejected duplicates', ['dead'])}${link('keys', 'Idempotency keys', ['keys'])}
          </nav>
        </header>
        <main>
          ${notice ? html`<div class="notice${notice.error ? ' error' : ''}" role="status">${notice.text}</div>` : ''}
          ${content}
        </main>
      </body>
    </html> `;
}

/** The counts strip. A lock count that stopped at its scan budget reads `N+`, with a line saying so. */
export function countsStrip(counts: LockCounts): SafeHtml {
  const more = counts.complete ? '' : '+';
  return html`<section class="counts" aria-label="Counts">
    <div class="count"><b data-count="enqueue">${counts.enqueueLocks}${more}</b><span>Enqueue locks</span></div>
    <div class="count"><b data-count="runtime">${counts.runtimeLocks}${more}</b><span>Run-time locks</span></div>
    <div class="count"><b data-count="dead">${counts.deadSet}</b><span>Rejected duplicates</span></div>
    ${
      counts.complete
        ? ''
        : html`<p class="muted" data-count="partial">
            Lock counts stop after a bounded part of the key space: at least this many are held.
          </p>`
    }
  </section>`;
}

/** The hidden CSRF field of a POST form. */
export function csrfField(context: PageContext): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${context.csrfToken}" />`;
}
