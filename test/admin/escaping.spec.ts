import { describe, expect, it } from '@jest/globals';
import { adminUrl, escapeHtml, html, styleSheet } from '../../lib/ops/admin/views/html.js';
import { countsStrip } from '../../lib/ops/admin/views/layout.view.js';
import { jsonBlock, storedJson } from '../../lib/ops/admin/views/format.js';
import { cutText, shortened } from '../../lib/ops/admin/views/text.js';
import { truncate } from '../../lib/ops/cli/output.js';

describe('admin views: escaping', () => {
  it('escapes every interpolated value, passes nested html fragments and arrays of them through', () => {
    const payload = `<img src=x onerror="alert('1')">&\`=`;
    expect(escapeHtml(payload)).toBe('&lt;img src&#61;x onerror&#61;&quot;alert(&#39;1&#39;)&quot;&gt;&amp;&#96;&#61;');
    const row = html`<td title="${payload}">${payload}</td>`;
    expect(row.toString()).not.toContain('<img');
    expect(row.toString()).not.toContain('"alert');
    const markup = html; // (not named `html`, so Prettier leaves the template's whitespace alone)
    const list = markup`<ul>${['<a>', markup`<li>${'<b>'}</li>`]}</ul>`;
    expect(list.toString()).toBe('<ul>&lt;a&gt;<li>&lt;b&gt;</li></ul>');
    expect(html`${undefined}${null}${false}${0}${true}`.toString()).toBe('0true');
    // A look-alike object is not trusted: only html`` creates SafeHtml.
    const forged = { toString: () => '<script>alert(1)</script>' } as unknown as string;
    expect(html`${forged}`.toString()).toBe('&lt;script&gt;alert(1)&lt;/script&gt;');
  });

  it('shows bidirectional formatting characters as \\uXXXX in the text, keeps them in attribute values', () => {
    const jobId = 'inv\u202eexe.fdp\u2066x\u2069';
    const markup = html; // (not named `html`, so Prettier leaves the template's whitespace alone)
    const cell = markup`<td><a href="/x?id=${jobId}" title="${jobId}">${jobId}</a></td><td>${[jobId]}</td>`;
    expect(cell.toString()).toBe(
      `<td><a href="/x?id=${jobId}" title="${jobId}">inv\\u202eexe.fdp\\u2066x\\u2069</a></td>` +
        '<td>inv\\u202eexe.fdp\\u2066x\\u2069</td>',
    );
    for (const shown of [jsonBlock({ id: jobId }), storedJson(JSON.stringify(jobId))]) {
      expect(String(shown)).not.toMatch(/[\u202e\u2066\u2069]/);
    }
  });

  it('admits a style sheet only when it cannot close its element', () => {
    expect(styleSheet('a { color: red }').toString()).toBe('a { color: red }');
    expect(() => styleSheet('</style><script>alert(1)</script>')).toThrow(/must not contain/);
  });

  it('builds same-site URLs: encoded segments and query values, one leading slash', () => {
    expect(adminUrl('/ops/unique-jobs', ['locks', 'v1:ab/../x?y'], { notice: 'released', n: 1, skip: undefined })).toBe(
      '/ops/unique-jobs/locks/v1%3Aab%2F..%2Fx%3Fy?notice=released&n=1',
    );
    expect(adminUrl('//evil.example/x')).toBe('/evil.example/x');
    expect(adminUrl('/')).toBe('/');
  });
});

describe('admin views: counts', () => {
  it('shows exact counts as they are, and counts cut at the scan budget as lower bounds', () => {
    const exact = countsStrip({ enqueueLocks: 4, runtimeLocks: 1, deadSet: 2, complete: true }).toString();
    expect(exact).toContain('<b data-count="enqueue">4</b>');
    expect(exact).toContain('<b data-count="runtime">1</b>');
    expect(exact).not.toContain('data-count="partial"');
    const cut = countsStrip({ enqueueLocks: 180_000, runtimeLocks: 12, deadSet: 2, complete: false }).toString();
    expect(cut).toContain('<b data-count="enqueue">180000+</b>');
    expect(cut).toContain('<b data-count="runtime">12+</b>');
    expect(cut).toContain('<b data-count="dead">2</b>');
    expect(cut).toMatch(/data-count="partial">\s*Lock counts stop after a bounded part of the key space/);
  });
});

// Review of session 26: jsonBlock cut job data with slice(), which could leave half of an emoji's surrogate pair.
describe('admin views: cuts never split a surrogate pair', () => {
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
  it.each([0, 1])('data of emoji, %i character(s) of padding before them', (pad) => {
    const text = 'a'.repeat(pad) + '😀'.repeat(30_000);
    for (const shown of [jsonBlock(text), jsonBlock({ note: text }), storedJson(text), cutText(text, 2_000)]) {
      expect(String(shown)).not.toMatch(lone);
    }
    expect(shortened(text)).not.toMatch(lone);
    expect(truncate(text, 101)).not.toMatch(lone); // the CLI's cut
  });
});
