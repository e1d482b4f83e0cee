import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { archivableFleet } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';

// docs/operations.md "Retention and archive": an archived event's id no longer blocks a retried
// append, so `store archive` refuses a policy shorter than the engine's retry window, and moves
// nothing.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-floor-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('store archive --older-than below one hour is refused, naming the floor, and the store is left whole', async () => {
  const path = join(dir, 'fleet.db');
  await archivableFleet(path);
  const store = ['--store', `sqlite:${path}`];
  const stats = async (): Promise<unknown> => {
    const { now: _, ...rest } = JSON.parse((await cliIn(dir, ['store', 'stats', ...store, '--json'])).stdout) as { now: string };
    return rest;
  };
  const before = await stats();
  const r = await cliIn(dir, ['store', 'archive', '--older-than', '59m', '--archive-dir', join(dir, 'a'), ...store]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--older-than 59m: must be at least 1h/);
  assert.deepEqual(await stats(), before);
});
