// Starts each `npm run test:chaos` with an empty report: every scenario writes its figures to a file of its own under
// .build/chaos-report.d/ (test/chaos/support/harness.ts), which global-teardown.ts merges into .build/chaos-report.json.
// (Jest loads this file and the teardown outside its module mapping: they import nothing of the suite's.)
import { rmSync } from 'node:fs';

export default function globalSetup(): void {
  rmSync(new URL('../../.build/chaos-report.json', import.meta.url), { force: true });
  rmSync(new URL('../../.build/chaos-report.d/', import.meta.url), { recursive: true, force: true });
}
