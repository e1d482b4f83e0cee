import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

// docs/architecture.md shows the import graph between folders, derived from the source by
// `npm run docs:figures`; a figure that no longer matches the code misleads the reader.
test('the import figure in docs/architecture.md matches the imports in the source', () => {
  const r = spawnSync(process.execPath, ['scripts/docsFigures.mjs', '--check'], {
    cwd: new URL('../..', import.meta.url),
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
});
