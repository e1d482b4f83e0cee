import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import fc from 'fast-check';
import pino from 'pino';
import type { NodeState } from '../../../projections/index.ts';
import { createMetrics } from '../../../src/metrics.ts';
import { createProjectionRunner } from '../../../src/readModel/projectionRunner.ts';
import { compareStates, replayStore, verifyReadModel } from '../../../src/readModel/replay.ts';
import { readSnapshot, writeSnapshot } from '../../../src/readModel/snapshot/snapshotFile.ts';
import { createMemoryEventStore } from '../../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../../support/history.ts';
import { tempDir } from '../../support/tempDir.ts';
import type { AfterHook } from '../../support/tempDir.ts';

// A snapshot was trusted blindly — forged values with the right foldVersion,
// position and event id were restored and served, and wrong types gave "reports":"NaN111".
// Every way a snapshot can lie or rot must end in a fold from zero that serves the store's
// truth, said in a warn log with the reason and counted in converge_snapshot_rejected_total.

type Rig = { dir: string; storePath: string; snapPath: string; events: number };

/** Three nodes (converged, behind after a stale report, alive only) and the snapshot an honest engine wrote of them. */
async function rig(t: AfterHook): Promise<Rig> {
  const dir = tempDir(t, 'converge-snaptrust-');
  const storePath = join(dir, 'store.db');
  const snapPath = `${storePath}.snapshot`;
  const store = createSqliteEventStore(storePath);
  const h = historyInStore(store);
  const a = await h.send('a', [{ id: 'web' }, { id: 'db' }]);
  h.tick();
  await h.report('a', { declared: a.digest, applied: ['web', 'db'], carried: [8080] });
  const b1 = await h.send('b');
  h.tick();
  await h.send('b', [{ id: 'web' }, { id: 'cache' }]);
  h.tick();
  await h.report('b', { declared: b1.digest, applied: ['web'], failed: { cache: 'no disk', __proto__: 'odd' } });
  await h.alive('c');
  h.tick();
  await h.alive('a');
  const runner = createProjectionRunner({ store, logger: pino({ level: 'silent' }), snapshot: { path: snapPath, everyEvents: 1_000_000 } });
  await runner.start();
  await runner.caughtUp();
  await runner.writeSnapshot();
  await runner.stop();
  await store.close();
  return { dir, storePath, snapPath, events: 7 };
}

/** A runner started over the rig's store and snapshot: what it folded, logged and counted. */
async function restart(r: Rig) {
  const lines: { level: number; msg: string; reason?: string; detail?: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l !== '') lines.push(JSON.parse(l) as (typeof lines)[number]);
      done();
    },
  });
  const metrics = createMetrics();
  const store = createSqliteEventStore(r.storePath);
  const runner = createProjectionRunner({
    store,
    logger: pino({ level: 'info' }, sink),
    metrics,
    snapshot: { path: r.snapPath, everyEvents: 1_000_000 },
  });
  const folded: bigint[] = [];
  runner.readModel.onChange((c) => folded.push(c.position));
  await runner.start();
  await runner.caughtUp();
  const diffs = await verifyReadModel(store, runner.readModel);
  const rejected = (await metrics.registry.getSingleMetricAsString('converge_snapshot_rejected_total'))
    .split('\n')
    .filter((l) => !l.startsWith('#') && l !== '');
  const states = new Map([...runner.readModel.nodes()].map((s) => [s.node, s]));
  await runner.stop();
  await store.close();
  return { folded, diffs, lines, rejected, states };
}

/** Rewrite the snapshot through the module's own writer: right header, a checksum that matches — a careful forger. */
async function forge(r: Rig, edit: (states: NodeState[]) => NodeState[]): Promise<void> {
  const snap = await readSnapshot(r.snapPath);
  assert.ok(snap !== null);
  const states = edit([...snap.states]);
  // Each node keeps its own transition; one the snapshot did not have gets none.
  const codes = new Map(snap.states.map((s, i) => [s.node, snap.transitions?.[i] ?? 0]));
  await writeSnapshot(r.snapPath, { ...snap, states, transitions: Uint8Array.from(states, (s) => codes.get(s.node) ?? 0) });
}

async function assertFoldedFromZero(r: Rig, reason: RegExp): Promise<void> {
  const got = await restart(r);
  assert.equal(got.folded.length, r.events, 'every event folded again: the snapshot was not restored');
  assert.deepEqual(got.diffs, [], 'the model served is the fold of the store');
  const warn = got.lines.find((l) => l.level === 40 && /snapshot/.test(l.msg));
  assert.ok(warn !== undefined, `a warn log about the snapshot; got ${JSON.stringify(got.lines)}`);
  assert.match(warn.msg, /folding from zero/);
  assert.match(`${warn.reason} ${warn.detail}`, reason);
  assert.equal(got.rejected.length, 1, `one reason counted: ${JSON.stringify(got.rejected)}`);
  assert.match(got.rejected[0]!, / 1$/);
}

test('an honest snapshot is restored: nothing folded again, nothing counted as rejected', async (t) => {
  const r = await rig(t);
  const got = await restart(r);
  assert.deepEqual(got.folded, []);
  assert.deepEqual(got.diffs, []);
  assert.deepEqual(got.rejected, []);
  const truth = await replayStore(createSqliteEventStore(r.storePath));
  assert.deepEqual(got.states.get('b'), truth.get('b'));
});

test('a forged value under the right header and a matching checksum is caught by the cross-check against the store', async (t) => {
  const r = await rig(t);
  await forge(r, (states) =>
    states.map((s) => (s.node === 'a' ? { ...s, reports: 41, anomalies: { stale: 0, unknown: 0, undeclared: 0 } } : s)),
  );
  await assertFoldedFromZero(r, /cross-check .*reports/);
});

test('a forged status that contradicts the node’s own send and report is refused', async (t) => {
  const r = await rig(t);
  await forge(r, (states) => states.map((s) => (s.node === 'b' ? { ...s, status: 'converged', caughtUp: true } : s)));
  await assertFoldedFromZero(r, /inconsistent .*status/);
});

test('a phantom node the store never saw is refused', async (t) => {
  const r = await rig(t);
  await forge(r, (states) => [...states, { ...states[0]!, node: 'ghost' }]);
  await assertFoldedFromZero(r, /cross-check .*ghost/);
});

test('a liveness transition the node stream does not hold is refused', async (t) => {
  const r = await rig(t);
  const snap = await readSnapshot(r.snapPath);
  assert.ok(snap !== null);
  // Every node recorded silent (code 2), where no stream holds a NodeSilent.
  await writeSnapshot(r.snapPath, { ...snap, transitions: new Uint8Array(snap.states.length).fill(2) });
  await assertFoldedFromZero(r, /cross-check .*latest liveness transition is silent in the snapshot, none in the store/);
});

test('wrong types ("reports": "NaN", a string serial) are refused by the schema, never folded onto', async (t) => {
  const r = await rig(t);
  await forge(r, (states) => states.map((s) => (s.node === 'c' ? ({ ...s, reports: 'NaN' } as unknown as NodeState) : s)));
  await assertFoldedFromZero(r, /schema .*reports/);
  const r2 = await rig(t);
  await forge(r2, (states) =>
    states.map((s) => (s.node === 'a' ? ({ ...s, sent: { ...s.sent!, serial: '1' } } as unknown as NodeState) : s)),
  );
  await assertFoldedFromZero(r2, /schema .*sentSerial/);
});

test('a byte changed in the file without resealing it fails the checksum', async (t) => {
  const r = await rig(t);
  const text = readFileSync(r.snapPath, 'latin1');
  // The latest alive of node a: an ISO time only it holds; one digit moved.
  const at = text.lastIndexOf('T14:00:');
  assert.ok(at > 0);
  const i = at + 7;
  writeFileSync(r.snapPath, Buffer.from(text.slice(0, i) + (text[i] === '9' ? '8' : '9') + text.slice(i + 1), 'latin1'));
  await assertFoldedFromZero(r, /checksum .*sha256/);
});

test('a truncated snapshot is refused', async (t) => {
  const r = await rig(t);
  const bytes = readFileSync(r.snapPath);
  writeFileSync(r.snapPath, bytes.subarray(0, Math.floor(bytes.length * 0.6)));
  await assertFoldedFromZero(r, /^(truncated|checksum) /);
});

test('a snapshot of the format before (one JSON object) is discarded with a log line naming both formats', async (t) => {
  const r = await rig(t);
  writeFileSync(r.snapPath, JSON.stringify({ format: 3, foldVersion: 3, position: { $big: '7' }, eventId: 'x', states: [] }));
  const got = await restart(r);
  assert.equal(got.folded.length, r.events);
  assert.deepEqual(got.diffs, []);
  const line = got.lines.find((l) => /snapshot not used/.test(l.msg));
  assert.match(`${line?.reason} ${line?.detail}`, /^format .*snapshot is format 3; this engine reads format 6 \(and 4, 5\)/);
  assert.match(got.rejected[0] ?? '', /reason="format"\} 1$/);
});

test('any history round-trips through a snapshot: the states read back are the fold of the store, field by field', async (t) => {
  const dir = tempDir(t, 'converge-snapround-');
  const step = fc.record({
    kind: fc.constantFrom('send', 'report', 'stale', 'unknown', 'legacy', 'refused', 'alive'),
    node: fc.constantFrom('n0', 'n1', 'n2', 'n-\u00e9'),
    ids: fc.subarray(['web', 'db', '$big', '__proto__', 'a\u0000b']),
    failed: fc.dictionary(fc.constantFrom('db', '__proto__', '$map', 'x'), fc.string({ maxLength: 5 }), { maxKeys: 2 }),
    carried: fc.array(fc.integer({ min: 1, max: 65_535 }), { maxLength: 2 }),
    tick: fc.integer({ min: 1, max: 90_000 }),
  });
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
      const store = createMemoryEventStore();
      const h = historyInStore(store);
      for (const st of steps) {
        h.tick(st.tick);
        const sent = h.digests(st.node);
        const resources = st.ids.map((id) => ({ id }));
        if (st.kind === 'send') await h.send(st.node, resources.length === 0 ? undefined : resources);
        else if (st.kind === 'alive') await h.alive(st.node);
        else {
          const declared =
            st.kind === 'legacy'
              ? null
              : st.kind === 'unknown'
                ? 'e'.repeat(64)
                : st.kind === 'stale'
                  ? (sent[0] ?? null)
                  : (sent.at(-1) ?? null);
          await h.report(st.node, {
            declared,
            applied: st.ids,
            failed: st.failed,
            carried: st.carried,
            ...(st.kind === 'refused' ? { refused: 'no' } : {}),
          });
        }
      }
      const path = join(dir, `round-${run++}.snapshot`);
      const first = createProjectionRunner({ store, logger: pino({ level: 'silent' }), snapshot: { path, everyEvents: 1_000_000 } });
      await first.start();
      await first.caughtUp();
      await first.writeSnapshot();
      await first.stop();
      const snap = await readSnapshot(path);
      assert.ok(snap !== null);
      assert.deepEqual(compareStates(await replayStore(store), snap.states), []);
      const second = createProjectionRunner({ store, logger: pino({ level: 'silent' }), snapshot: { path, everyEvents: 1_000_000 } });
      const folded: bigint[] = [];
      second.readModel.onChange((c) => folded.push(c.position));
      await second.start();
      await second.caughtUp();
      assert.deepEqual(folded, [], 'restored, not folded again');
      assert.deepEqual(await verifyReadModel(store, second.readModel), []);
      await second.stop();
    }),
    { numRuns: 40 },
  );
});
