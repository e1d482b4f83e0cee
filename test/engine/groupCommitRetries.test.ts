import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createSender } from '../../src/engine/send.ts';
import { abortRollout, pauseRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { testKey } from '../support/history.ts';
import { until } from '../support/until.ts';

// serve appends by group commit (walSync.ts): its own reads stop before the oldest commit not yet
// synced. A node's report committed by ingest and waiting for its sync moves the node's stream, but
// a send cannot read it yet: catching up finds nothing new. Found: both senders tried again at once,
// 101 times within one turn of the event loop (so before the sync could land), and answered 409
// "the node's own events moved its stream 101 times in a row" to a send that would have succeeded
// a few ms later. A rollout command (pause, resume, abort) racing the driver's append did the same,
// 5 times.

const dir = mkdtempSync(join(tmpdir(), 'converge-send-group-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A group-commit store whose WAL syncs wait until released, and an alive of `node` committed with its sync held. */
async function withUnsyncedAlive(node: string): Promise<{ store: EventStore; release: () => void; alive: Promise<unknown> }> {
  const held: (() => void)[] = [];
  let holding = false;
  const store = createSqliteEventStore(join(dir, `send-${n++}.db`), {
    sync: 'group',
    walSync: () => (holding ? new Promise<void>((resolve) => held.push(resolve)) : Promise.resolve()),
  });
  holding = true;
  const alive = store.append([
    { stream: streamOf(node), expected: 'any', events: [makeAliveSeen({ node }, new Date('2026-12-01T10:00:00Z'))] },
  ]);
  await until('the alive waiting for its sync', () => held.length === 1);
  const release = (): void => {
    holding = false;
    for (const r of held.splice(0)) r();
  };
  return { store, release, alive };
}

test('a send to a node whose latest event waits for its group-commit sync is recorded once the sync lands, not refused', async () => {
  const { store, release, alive } = await withUnsyncedAlive('a');
  const sender = createSender({ store, key: testKey });
  const sent = sender.send('a', [{ id: 'web' }]);
  const timer = setTimeout(release, 50);
  try {
    const r = await sent;
    assert.equal(r.serial, 1);
    await alive;
    assert.deepEqual(
      (await store.readStream(streamOf('a'))).map((e) => e.type),
      ['AliveSeen', 'DeclarationSent'],
    );
  } finally {
    clearTimeout(timer);
    release();
    await store.close();
  }
});

test('a bulk send (a rollout wave) to such a node is recorded once the sync lands, not refused', async () => {
  const { store, release, alive } = await withUnsyncedAlive('b');
  const batch = createBatchSender({ store, key: testKey });
  const sent = batch.sendMany([{ node: 'b', resources: [{ id: 'web' }] }]);
  const timer = setTimeout(release, 50);
  try {
    const r = await sent;
    assert.deepEqual(
      r.outcomes.map((o) => o.ok),
      [true],
    );
    await alive;
  } finally {
    clearTimeout(timer);
    release();
    await store.close();
  }
});

test("a rollout command racing the driver's append that waits for its sync reads it once synced, instead of answering 409", async () => {
  // abortRollout read the rollout (without the driver's event, here a pause, not readable before its
  // sync), appended at that revision, failed, and tried again at once: 5 times in one turn, 409.
  const held: (() => void)[] = [];
  let holding = false;
  const store = createSqliteEventStore(join(dir, `rollout-${n++}.db`), {
    sync: 'group',
    walSync: () => (holding ? new Promise<void>((resolve) => held.push(resolve)) : Promise.resolve()),
  });
  const deps = { store, now: () => new Date('2026-12-01T10:00:00Z'), nodeStates: () => [] };
  await startRollout(deps, {
    rollout: 'r1',
    resources: [{ id: 'web' }],
    selection: { kind: 'nodes', nodes: ['a', 'b'] },
    waves: '1,100%',
    maxFailures: '1',
    waveTimeoutMs: 60_000,
    startedBy: 'test',
  });
  holding = true;
  const first = pauseRollout(deps, 'r1', { by: 'driver', reason: 'first' });
  await until('the first pause waiting for its sync', () => held.length === 1);
  const second = abortRollout({ ...deps, now: () => new Date('2026-12-01T10:00:01Z') }, 'r1', { by: 'operator', reason: 'second' });
  const timer = setTimeout(() => {
    holding = false;
    for (const r of held.splice(0)) r();
  }, 50);
  try {
    assert.equal((await first).status, 'paused');
    assert.equal((await second).status, 'aborted');
  } finally {
    clearTimeout(timer);
    holding = false;
    for (const r of held.splice(0)) r();
    await store.close();
  }
});
