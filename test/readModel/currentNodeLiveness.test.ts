import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import { currentNode, stateAsOf } from '../../src/readModel/queries.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore, recordObservation } from '../support/history.ts';
import { tempDir } from '../support/tempDir.ts';

// `converge status <node>` (currentNode) answers for now what `converge state <node> --at <now>`
// (stateAsOf) answers, and `status` lists every node so while no engine observes: liveness from the record — the engine's own transitions and whether an
// engine observed at all (docs/design.md §3) — not from the reader's grace.

const engineGraceMs = 6_000;
const readerGraceMs = 60_000;

async function store(): Promise<{ s: EventStore; h: ReturnType<typeof historyInStore> }> {
  const s = createMemoryEventStore();
  const h = historyInStore(s);
  await recordObservation(s, makeObservationStarted('e1', h.now().getTime(), engineGraceMs, null));
  await h.heard('n1');
  await h.alive('n1');
  return { s, h };
}

const asOfNow = async (s: EventStore, now: number) =>
  (await stateAsOf(s, 'n1', { kind: 'time', time: now, iso: new Date(now).toISOString() }, readerGraceMs)).state.liveness.state;

test('a node the engine recorded silent is disconnected now, whatever grace the reader gives', async () => {
  const { s, h } = await store();
  const lastSeen = h.now().getTime();
  h.tick(engineGraceMs + 7_000);
  await h.silent('n1', lastSeen, engineGraceMs);
  const now = h.now().getTime();
  assert.equal(await asOfNow(s, now), 'disconnected');
  assert.equal((await currentNode(s, 'n1', now, readerGraceMs)).liveness.state, 'disconnected');
});

test('with the engine stopped, now is not observed, as state --at now says', async () => {
  const { s, h } = await store();
  h.tick(1_000);
  await recordObservation(s, makeObservationStopped('e1', h.now().getTime(), 'stopped'));
  h.tick(120_000);
  const now = h.now().getTime();
  assert.equal(await asOfNow(s, now), 'not-observed');
  assert.equal((await currentNode(s, 'n1', now, readerGraceMs)).liveness.state, 'not-observed');
});

test('status lists every node not-observed while no engine observes, and status <node> says the same', async (t) => {
  const dir = tempDir(t, 'converge-status-observed-');
  const path = join(dir, 'store.db');
  const s = createSqliteEventStore(path);
  const h = historyInStore(s);
  await recordObservation(s, makeObservationStarted('e1', h.now().getTime(), engineGraceMs, null));
  await h.heard('n1');
  h.tick(1_000);
  await recordObservation(s, makeObservationStopped('e1', h.now().getTime(), 'stopped'));
  await s.close();
  const list = await cliIn(dir, ['status', '--json', '--store', `sqlite:${path}`]);
  assert.equal(list.code, 0, list.stderr);
  const listed = list.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { node: string; liveness: { state: string } });
  assert.deepEqual(
    listed.map((v) => [v.node, v.liveness.state]),
    [['n1', 'not-observed']],
  );
  const one = await cliIn(dir, ['status', 'n1', '--json', '--store', `sqlite:${path}`]);
  assert.equal(JSON.parse(one.stdout).liveness.state, 'not-observed');
});
