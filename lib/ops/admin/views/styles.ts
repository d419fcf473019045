/** The page's one stylesheet, inlined with a CSP nonce (no other style can apply). */
export const ADMIN_CSS = `
:root { color-scheme: light; --fg: #1d2330; --muted: #6b7280; --line: #e3e6ec; --bg: #f6f7f9; --accent: #2457c5;
  --danger: #b42318; --ok: #067647; --warn: #b54708; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue",
  "Liberation Sans", "DejaVu Sans", Arial, sans-serif;
  color: var(--fg); background: var(--bg); }
header { background: #111827; color: #fff; padding: 12px 24px; display: flex; align-items: center; gap: 24px; }
header h1 { font-size: 17px; margin: 0; font-weight: 600; }
header nav a { color: #cbd5e1; text-decoration: none; margin-right: 16px; padding: 4px 0; }
header nav a.active, header nav a:hover { color: #fff; border-bottom: 2px solid #60a5fa; }
main { padding: 20px 24px 40px; max-width: 1400px; }
h2 { font-size: 18px; margin: 4px 0 12px; }
h3 { font-size: 15px; margin: 22px 0 8px; }
a { color: var(--accent); }
.counts { display: flex; gap: 12px; margin-bottom: 16px; flex-wrap: wrap; }
.count { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 160px; }
.count b { display: block; font-size: 22px; }
.count span { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin-bottom: 16px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); border-radius: 8px;
  overflow: hidden; }
th, td { text-align: left; padding: 8px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em;
  color: #4b5563; }
tr:last-child td { border-bottom: 0; }
td.mono, .mono, code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace;
  font-size: 12.5px; word-break: break-all; }
.muted { color: var(--muted); }
.nowrap, time, td.digest, td.queue, td.when, td.ttl { white-space: nowrap; }
td.digest a { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace;
  font-size: 12.5px; }
td.lockref { min-width: 200px; max-width: 260px; }
td.lockref a { white-space: nowrap; font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono",
  monospace; font-size: 12.5px; }
td.data { min-width: 300px; max-width: 460px; }
td.reason, td.wrap { min-width: 200px; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
  background: #eef2ff; color: #3730a3; }
.state-active { background: #e0f2fe; color: #075985; }
.state-waiting, .state-prioritized, .state-waiting-children { background: #f1f5f9; color: #334155; }
.state-delayed { background: #fef3c7; color: var(--warn); }
.state-completed { background: #dcfce7; color: var(--ok); }
.state-failed, .state-missing { background: #fee4e2; color: var(--danger); }
.state-unknown { background: #f3f4f6; color: #374151; }
.kind { font-size: 12px; font-weight: 600; }
form.inline { display: inline; margin: 0; }
form.filters { display: flex; gap: 10px; align-items: flex-end; flex-wrap: wrap; }
label { display: flex; flex-direction: column; font-size: 12px; color: #4b5563; gap: 3px; }
input, select { font: inherit; padding: 5px 8px; border: 1px solid #cfd4dc; border-radius: 6px; background: #fff;
  min-width: 120px; }
input.wide { min-width: 320px; }
button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid #cfd4dc; background: #fff;
  cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { background: #fff; border-color: #f3b8b2; color: var(--danger); }
button.danger:hover { background: #fef3f2; }
.notice { border-radius: 8px; padding: 10px 14px; margin-bottom: 16px; background: #ecfdf3; border: 1px solid #abefc6;
  color: #054f31; }
.notice.error { background: #fef3f2; border-color: #fecdca; color: #7a271a; }
pre.json { background: #0f172a; color: #e2e8f0; padding: 10px 12px; border-radius: 6px; overflow: auto;
  max-height: 320px; margin: 4px 0; font-size: 12.5px; white-space: pre-wrap; word-break: break-word; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; }
.pager { margin-top: 12px; display: flex; gap: 16px; }
.owners div + div { margin-top: 4px; }
`;
