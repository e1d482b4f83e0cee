import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { tempDir } from '../support/tempDir.ts';
import { until } from '../support/until.ts';

// serve's snapshot step (lifecycle.ts) gives the last snapshot a bound: past it, writeNow gives up,
// the previous snapshot stays, and the stop goes on. When a periodic snapshot was being written at
// that moment, writeNow waited for it first; once given up, it must not go on to write a snapshot
// of its own later, behind the stop's back (runner.stop()'s settled() then waits for that whole write).

test('a writeNow given up while an earlier write is held writes nothing once that write ends', async (t) => {
  let release = (): void => {};
  t.after(() => release());
  const path = join(tempDir(t, 'converge-snapgivenup-'), 'events.snapshot');
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.report('given-1');
  const runner = createProjectionRunner({ store, logger, snapshot: { path, everyEvents: 1_000_000 } });
  t.after(() => runner.stop());
  await runner.start();
  await runner.caughtUp();
  await runner.writeSnapshot();
  const before = readFileSync(path);
  await h.report('given-2');
  await until('the new report to be folded', () => runner.readModel.get('given-2') !== undefined);

  // The earlier write (a periodic one, say) is held at its open: its temporary file is a pipe nobody reads.
  const tmp = `${path}.${process.pid}.tmp`;
  execFileSync('mkfifo', [tmp]);
  release = () => closeSync(openSync(tmp, constants.O_RDONLY | constants.O_NONBLOCK));
  const earlier = runner.writeSnapshot();

  // The stop's snapshot, bound to 20 ms: given up while it waits for the earlier one.
  await runner.writeSnapshot(20);

  // The earlier write's disk answers: it ends, given up too, and removes its temporary file.
  release();
  release = () => undefined;
  await earlier;
  await runner.stop();
  rmSync(tmp, { force: true });
  assert.ok(!existsSync(tmp));
  const header = (b: Buffer): string => b.subarray(0, b.indexOf(0x0a)).toString('utf8');
  assert.equal(header(readFileSync(path)), header(before), 'a snapshot was written after writeNow gave up');
});
