import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A test's scratch dir that does not outlive it. The hook is the test's own `t.after` (or, for a
// dir a whole file shares, node:test's `after`): both run whether the test passed or failed.

export type AfterHook = Readonly<{ after: (fn: () => void) => unknown }>;

/** A fresh dir under the OS temp dir, named `prefix` and a random suffix, removed by `hook.after`. */
export function tempDir(hook: AfterHook, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  hook.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
