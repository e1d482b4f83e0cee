import { fileURLToPath } from 'node:url';
import { isDashboardBuilt } from '../api/routes/dashboard.ts';

/**
 * The built dashboard (dist/dashboard), found from where this module runs: dist/src/app
 * when compiled (bin/converge.js), src/app under tsx (tests). Null when `npm run build` has not
 * built it.
 */
export function findDashboardDir(): string | null {
  for (const relative of ['../../dashboard/', '../../dist/dashboard/']) {
    const dir = fileURLToPath(new URL(relative, import.meta.url));
    if (isDashboardBuilt(dir)) return dir;
  }
  return null;
}
