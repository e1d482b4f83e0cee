import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parseAt } from '../../projections/index.ts';
import { buildEvidence } from '../../src/readModel/evidence/build.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { randomFleet, untimed } from '../support/steppedFleet.ts';

// An evidence bundle as of a moment reads the node's stream as of it (docs/store.md "Segment time
// ranges"): over an archive, with the segments' time ranges or without them, it is the bundle the
// store gave before any move.

const dir = mkdtempSync(join(tmpdir(), 'converge-evidence-archive-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const bundle = async (store: EventStore, node: string, moment: string): Promise<unknown> => {
  try {
    return await buildEvidence(store, {
      node,
      at: parseAt(moment)!,
      atText: moment,
      from: null,
      graceMs: 60_000,
      auditKey: null,
      declarationKey: null,
      unsigned: true,
      now: () => 0,
    });
  } finally {
    await store.close();
  }
};

test('an evidence bundle over the archive is the one the store gave before the move, time ranges or none', async () => {
  const path = join(dir, 'fleet.db');
  const archive = join(dir, 'archive');
  const f = await randomFleet(createSqliteEventStore(path), 8, true);
  const moments = [0.2, 0.6].map((frac) => new Date(f.start + frac * (f.end - f.start)).toISOString());
  const asked = moments.flatMap((m) => ['n0', 'n3'].map((node) => ({ node, m })));
  const original = [];
  for (const { node, m } of asked) original.push(await bundle(createSqliteEventStore(path), node, m));
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 40 });
  assert.ok(r.segments.length >= 10, `${r.segments.length} segments`);
  for (const [i, { node, m }] of asked.entries()) {
    assert.deepEqual(await bundle(await withArchive(createSqliteEventStore(path), archive), node, m), original[i], `${node} at ${m}`);
    const whole = await withArchive(untimed(createSqliteEventStore(path)), archive);
    assert.deepEqual(await bundle(whole, node, m), original[i], `${node} at ${m}, every segment`);
  }
});
