// Ends each `npm run test:chaos` by merging the scenarios' figures (.build/chaos-report.d/<scenario>.json, one file per
// scenario: two jest workers run scenarios at once, and one file read, changed and written by both would lose one's
// figures or be read half written) into .build/chaos-report.json, `{ scenarios: { <name>: figures }, updatedAt }`.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

export default function globalTeardown(): void {
  const parts = new URL('../../.build/chaos-report.d/', import.meta.url);
  if (!existsSync(parts)) return; // no scenario wrote figures
  const scenarios: Record<string, unknown> = {};
  for (const part of readdirSync(parts)
    .filter((name) => name.endsWith('.json'))
    .sort()) {
    scenarios[part.slice(0, -'.json'.length)] = JSON.parse(readFileSync(new URL(part, parts), 'utf8'));
  }
  const report = { scenarios, updatedAt: new Date().toISOString() };
  writeFileSync(new URL('../../.build/chaos-report.json', import.meta.url), `${JSON.stringify(report, null, 2)}\n`);
  rmSync(parts, { recursive: true, force: true });
}
