import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import pino from 'pino';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { openSnapshot } from '../../../src/readModel/snapshot/snapshotFile.ts';
import { crossCheck, crossCheckBudgetFor, crossCheckSamples } from '../../../src/readModel/snapshot/trust.ts';
import { createMemoryEventStore } from '../../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../../src/store/port.ts';
import { historyInStore } from '../../support/history.ts';

const scratch = mkdtempSync(join(tmpdir(), 'converge-crosscheck-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let rigs = 0;

// The warm start's cross-check (src/readModel/snapshot/trust.ts) re-folds sampled nodes from the
// store. It read each sampled node's whole stream, so a year of history made every start slower;
// it now stops at a budget of events read that follows the fleet's size, not the history's, and
// passes over a stream that began in the archive (its first stored event is not revision 0),
// having read that event alone, instead of calling the snapshot a forgery.

const nodes = 40;
const sendsPerNode = 10;

async function rig(rounds = sendsPerNode): Promise<{ store: EventStore; snapPath: string }> {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < nodes; i++) {
      const node = `n${i}`;
      const sent = await h.send(node, [{ id: 'web', version: String(round) }]);
      await h.report(node, { declared: sent.digest, applied: ['web'] });
    }
    h.tick();
  }
  const snapPath = join(scratch, `store-${++rigs}.snapshot`);
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

test("the default budget follows the snapshot's nodes: a long history is checked on fewer nodes, not read for longer", async () => {
  const rounds = 40;
  const { store, snapPath } = await rig(rounds);
  const snap = await openSnapshot(snapPath);
  assert.ok(snap !== null);
  const perStream = rounds * 2;
  const budget = crossCheckBudgetFor(nodes);
  assert.ok(budget < crossCheckSamples * perStream, 'the rig is long enough for the budget to bind');
  const r = await crossCheck(store, snap);
  // Stopped once the budget was spent: at most one stream past it, and a probe of one event per node drawn.
  assert.ok(r.eventsRead <= budget + perStream, `read ${r.eventsRead} events, budget ${budget}`);
  assert.ok(r.checked >= 1 && r.checked < crossCheckSamples, `checked ${r.checked}`);
  assert.equal(r.eventsRead, r.checked * perStream);
});

test('a stream whose beginning was archived is passed over, not taken for a forgery', async () => {
  const { store, snapPath } = await rig();
  const snap = await openSnapshot(snapPath);
  assert.ok(snap !== null);
  // The store as retention leaves it for half the nodes: their first two events moved to the archive.
  const archivedNodes = new Set(Array.from({ length: nodes / 2 }, (_, i) => `node-n${i * 2}`));
  const trimmed: EventStore = {
    ...store,
    readStream: async (stream, options = {}) => {
      if (!archivedNodes.has(stream)) return store.readStream(stream, options);
      const { limit, ...rest } = options;
      const events = (await store.readStream(stream, rest)).slice(2);
      return limit === undefined ? events : events.slice(0, limit);
    },
  };
  const r = await crossCheck(trimmed, snap, 12, 1_000_000);
  assert.equal(r.checked, 12, 'other nodes drawn in their place');
  // Without the revision rule, the trimmed streams fold to other states and the snapshot is refused.
  const all = await crossCheck(trimmed, snap, nodes, 1_000_000);
  assert.equal(all.checked + all.archived, nodes);
  assert.equal(all.archived, nodes / 2);
  // Each archived stream cost its first stored event, not a read of what is left of it.
  assert.equal(all.eventsRead, (nodes / 2) * sendsPerNode * 2 + nodes / 2);
});
