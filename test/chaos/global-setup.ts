// Starts each `npm run test:chaos` with an empty report: every scenario adds its figures to .build/chaos-report.json.
import { rmSync } from 'node:fs';

export default function globalSetup(): void {
  rmSync(new URL('../../.build/chaos-report.json', import.meta.url), { force: true });
}
