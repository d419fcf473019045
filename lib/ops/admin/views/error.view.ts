import { html, styleSheet, type SafeHtml } from './html.js';
import { ADMIN_CSS } from './styles.js';

/** A standalone error page (also for requests the guard refused: no data, no links). */
export function errorPage(status: number, message: string, nonce: string): SafeHtml {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>${status} · Unique jobs</title>
        <style nonce="${nonce}">
          ${styleSheet(ADMIN_CSS)}
        </style>
      </head>
      <body>
        <main>
          <h2>${status}</h2>
          <div class="notice error" role="alert">${message}</div>
        </main>
      </body>
    </html> `;
}
