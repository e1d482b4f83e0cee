import assert from 'node:assert/strict';
import { test } from 'node:test';
import { threadsOf } from '../../src/cli/commands/auditSources.ts';

// `converge audit verify`'s default: one thread, its own. On the two-core machine it was measured on,
// the pool of reading threads took more CPU than the walk it split and finished later
// (BENCHMARKS.md#audit-tree-rfc-9162-merkle-tree); `--threads <n>` still asks for one.
test('audit verify walks on its own thread unless --threads asks for more', () => {
  assert.equal(threadsOf(undefined), 1);
  assert.equal(threadsOf('2'), 2);
  assert.equal(threadsOf('1'), 1);
  assert.throws(() => threadsOf('0'), /--threads: expected a whole number from 1 to 64/);
});
