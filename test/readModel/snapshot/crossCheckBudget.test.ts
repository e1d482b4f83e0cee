import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { openSnapshot } from '../../../src/readModel/snapshot/snapshotFile.ts';
import { crossCheck } from '../../../src/readModel/snapshot/trust.ts';
import { createMemoryEventStore } from '../../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../../src/store/port.ts';
import { historyInStore } from '../../support/history.ts';

// The warm start's cross-check (src/readModel/snapshot/trust.ts) re-folds sampled nodes from the
// store. It read each sampled node's whole stream, so a year of history made every start slower;
// it now stops at a budget of events read, and passes over a stream that began in the archive
// (its first stored event is not revision 0) instead of calling the snapshot a forgery.

const nodes = 40;
const sendsPerNode = 10;

async function rig(): Promise<{ store: EventStore; snapPath: string }> {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  for (let round = 0; round < sendsPerNode; round++) {
    for (let i = 0; i < nodes; i++) {
      const node = `n${i}`;
      const sent = await h.send(node, [{ id: 'web', version: String(round) }]);
      await h.report(node, { declared: sent.digest, applied: ['web'] });
    }
    h.tick();
  }
  const snapPath = join(mkdtempSync(join(tmpdir(), 'converge-crosscheck-')), 'store.snapshot');
  const runner = createProjectionRunner({ store, logger: pino({ level: 'silent' }), snapshot: { path: snapPath, everyEvents: 1_000_000 } });
  await runner.start();
  await runner.caughtUp();
  await runner.writeSnapshot();
  await runner.stop();
  return { store, snapPath };
}

test('the cross-check stops at its budget of events read, having checked at least one node', async () => {
  const { store, snapPath } = await rig();
  const snap = await openSnapshot(snapPath);
  assert.ok(snap !== null);
  const perStream = sendsPerNode * 2;
  const all = await crossCheck(store, snap, 24, 1_000_000);
  assert.equal(all.checked, 24);
  assert.equal(all.eventsRead, 24 * perStream);
  const bounded = await crossCheck(store, snap, 24, 5 * perStream);
  assert.equal(bounded.checked, 5);
  assert.equal(bounded.eventsRead, 5 * perStream);
  const tiny = await crossCheck(store, snap, 24, 1);
  assert.equal(tiny.checked, 1, 'the first node picked is checked whatever the budget');
});

test('a stream whose beginning was archived is passed over, not taken for a forgery', async () => {
  const { store, snapPath } = await rig();
  const snap = await openSnapshot(snapPath);
  assert.ok(snap !== null);
  // The store as retention leaves it for half the nodes: their first two events moved to the archive.
  const archivedNodes = new Set(Array.from({ length: nodes / 2 }, (_, i) => `node-n${i * 2}`));
  const trimmed: EventStore = {
    ...store,
    readStream: async (stream, options) => {
      const events = await store.readStream(stream, options);
      return archivedNodes.has(stream) ? events.slice(2) : events;
    },
  };
  const r = await crossCheck(trimmed, snap, 12, 1_000_000);
  assert.equal(r.checked, 12, 'other nodes drawn in their place');
  // Without the revision rule, the trimmed streams fold to other states and the snapshot is refused.
  const all = await crossCheck(trimmed, snap, nodes, 1_000_000);
  assert.equal(all.checked + all.archived, nodes);
  assert.equal(all.archived, nodes / 2);
});
