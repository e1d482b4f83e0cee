import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { loadConfig } from '../../src/app/config.ts';
import { ConvergeError } from '../../src/core/errors.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { verifyReadModel } from '../../src/readModel/replay.ts';
import { readSnapshot } from '../../src/readModel/snapshot/snapshotFile.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { historyInStore } from '../support/history.ts';
import type { StoreHistory } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { tempDir } from '../support/tempDir.ts';

type Op = { kind: 'send' | 'report-latest' | 'report-stale' | 'report-unknown' | 'report-legacy' | 'alive'; node: number; tick: number };

const op = fc.record({
  kind: fc.constantFrom('send', 'report-latest', 'report-stale', 'report-unknown', 'report-legacy', 'alive'),
  node: fc.integer({ min: 0, max: 5 }),
  tick: fc.integer({ min: 0, max: 5_000 }),
}) as fc.Arbitrary<Op>;

async function play(script: StoreHistory, ops: readonly Op[]): Promise<void> {
  for (const o of ops) {
    script.tick(o.tick + 1);
    const node = `n${o.node}`;
    const sent = script.digests(node);
    switch (o.kind) {
      case 'send':
        await script.send(node, [{ id: 'web' }, { id: `r${o.tick % 3}` }]);
        break;
      case 'report-latest':
        await script.report(node, { declared: sent.at(-1) ?? null, applied: ['web'] });
        break;
      case 'report-stale':
        await script.report(node, { declared: sent[0] ?? null, applied: ['web'] });
        break;
      case 'report-unknown':
        await script.report(node, { declared: 'f'.repeat(64) });
        break;
      case 'report-legacy':
        await script.report(node, { declared: null, applied: ['web'] });
        break;
      case 'alive':
        await script.alive(node);
        break;
    }
  }
}

test('after a randomized run of sends, reports and alives, a replay from zero finds no difference with the live read model', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 80 }), fc.integer({ min: 1, max: 7 }), async (ops, batchSize) => {
      const store = createMemoryEventStore();
      // The runner follows live while the events are appended, in small batches: the path serve runs.
      const runner = createProjectionRunner({ store, logger, batchSize });
      await runner.start();
      await play(historyInStore(store), ops);
      const head = await store.headPosition();
      await until('the runner to fold the store head', () => (runner.readModel.position() ?? null) === head, { everyMs: 0 });
      assert.deepEqual(await verifyReadModel(store, runner.readModel), []);
      await runner.stop();
      await store.close();
    }),
    { numRuns: 40 },
  );
});

test('over SQLite, where live events reach the runner as appended and a replay reads them back from the file, replay = live', async (t) => {
  const dir = tempDir(t, 'converge-live-');
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 7 }), async (ops, batchSize) => {
      const store = createSqliteEventStore(join(dir, `live-${run++}.db`));
      const runner = createProjectionRunner({ store, logger, batchSize });
      await runner.start();
      await play(historyInStore(store), ops);
      const head = await store.headPosition();
      await until('the runner to fold the store head', () => (runner.readModel.position() ?? null) === head, { everyMs: 0 });
      assert.deepEqual(await verifyReadModel(store, runner.readModel), []);
      await runner.stop();
      await store.close();
    }),
    { numRuns: 15 },
  );
});

test('after tampering with the read model, replay --verify finds the difference node by node', async () => {
  const store = createMemoryEventStore();
  const script = historyInStore(store);
  const a = await script.send('t1');
  await script.report('t1', { declared: a.digest, applied: ['web'] });
  await script.send('t2');
  const runner = createProjectionRunner({ store, logger });
  await runner.start();
  await runner.caughtUp();
  const t1 = runner.readModel.get('t1')!;
  runner.readModel.set({ ...t1, status: 'behind', caughtUp: false });
  const diffs = await verifyReadModel(store, runner.readModel);
  assert.deepEqual(
    diffs.map((d) => [d.node, d.field]),
    [
      ['t1', 'caughtUp'],
      ['t1', 'status'],
    ],
  );
  assert.equal(diffs.find((d) => d.field === 'status')?.expected, '"converged"');
  await runner.stop();
});

test('a restarted runner restores its snapshot, folds only what came after, and ends where a fold from zero ends', async (t) => {
  const dir = tempDir(t, 'converge-snap-');
  const path = join(dir, 'store.db');
  const snapshot = { path: `${path}.snapshot.json`, everyEvents: 5 };
  let store = createSqliteEventStore(path);
  let script = historyInStore(store);
  for (let i = 0; i < 12; i++) {
    script.tick();
    await script.alive(`s${i % 3}`);
  }
  const first = createProjectionRunner({ store, logger, snapshot });
  await first.start();
  await first.caughtUp();
  await first.writeSnapshot();
  await first.stop();
  const snap = await readSnapshot(snapshot.path);
  assert.equal(snap?.position, 12n);
  await store.close();

  store = createSqliteEventStore(path);
  script = historyInStore(store, Date.parse('2026-11-30T00:00:00Z'));
  const a = await script.send('s1');
  await script.report('s1', { declared: a.digest, applied: ['web'] });
  const second = createProjectionRunner({ store, logger, snapshot });
  const folded: bigint[] = [];
  second.readModel.onChange((c) => folded.push(c.position));
  await second.start();
  await second.caughtUp();
  assert.deepEqual(folded, [13n, 14n], 'only the events after the snapshot were folded');
  assert.equal(second.readModel.get('s1')?.status, 'converged');
  assert.equal(second.readModel.size(), 3);
  assert.deepEqual(await verifyReadModel(store, second.readModel), []);
  await second.stop();
  await store.close();
});

test('the snapshot interval is the larger of everyEvents and everyEventsPerNode × the nodes held', async (t) => {
  const dir = tempDir(t, 'converge-snap-every-');
  const path = join(dir, 'store.db');
  const store = createSqliteEventStore(path);
  const script = historyInStore(store);
  const aliveTimes = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      script.tick();
      await script.alive(`p${i % 4}`);
    }
  };
  const folded = async (snapshot: { path: string; everyEvents: number; everyEventsPerNode?: number }): Promise<bigint | null> => {
    const runner = createProjectionRunner({ store, logger, snapshot });
    await runner.start();
    await runner.caughtUp();
    await runner.stop(); // waits for a snapshot being written; writes none of its own
    return (await readSnapshot(snapshot.path))?.position ?? null;
  };
  await aliveTimes(19); // four nodes: 4 × 5 = 20 events between snapshots
  assert.equal(await folded({ path: join(dir, 'a.snap'), everyEvents: 2, everyEventsPerNode: 5 }), null);
  assert.equal(await folded({ path: join(dir, 'b.snap'), everyEvents: 2 }), 19n, 'without a per-node interval, everyEvents alone');
  assert.equal(await folded({ path: join(dir, 'c.snap'), everyEvents: 40, everyEventsPerNode: 5 }), null, 'everyEvents when larger');
  await aliveTimes(1);
  assert.equal(await folded({ path: join(dir, 'd.snap'), everyEvents: 2, everyEventsPerNode: 5 }), 20n);
  await store.close();
});

test('a snapshot from another store is ignored and the runner folds from zero', async (t) => {
  const dir = tempDir(t, 'converge-snap-');
  const snapshot = { path: join(dir, 'snap.json'), everyEvents: 1 };
  const one = createMemoryEventStore();
  await historyInStore(one).alive('x');
  const r1 = createProjectionRunner({ store: one, logger, snapshot });
  await r1.start();
  await r1.caughtUp();
  await r1.writeSnapshot();
  await r1.stop();
  const other = createMemoryEventStore();
  await historyInStore(other, Date.parse('2025-01-01T00:00:00Z')).alive('y');
  const r2 = createProjectionRunner({ store: other, logger, snapshot });
  await r2.start();
  await r2.caughtUp();
  assert.deepEqual(
    [...r2.readModel.nodes()].map((s) => s.node),
    ['y'],
  );
  await r2.stop();
});

test('lag counts the events the runner has not folded, and readiness waits for the catch-up', async () => {
  const store = createMemoryEventStore();
  const script = historyInStore(store);
  for (let i = 0; i < 3; i++) {
    script.tick();
    await script.alive('l1');
  }
  const runner = createProjectionRunner({ store, logger });
  assert.equal(runner.isReady(), false);
  assert.equal(await runner.lag(), 3n);
  await runner.start();
  await runner.caughtUp();
  assert.equal(runner.isReady(), true);
  assert.equal(await runner.lag(), 0n);
  await runner.stop();
});

test('a report whose failed map has a resource named "$big" restores from a snapshot exactly as it was folded', async (t) => {
  // A node states `failed` keys freely (wire.go Report.Failed); a snapshot must not read one back
  // as its own bigint or Map tags, or the restored model differs from a fold from zero.
  const dir = tempDir(t, 'converge-snap-');
  const path = join(dir, 'store.db');
  const snapshot = { path: `${path}.snapshot.json`, everyEvents: 1 };
  let store = createSqliteEventStore(path);
  const script = historyInStore(store);
  const a = await script.send('h1', [{ id: '$big' }, { id: '$map' }]);
  await script.report('h1', { declared: a.digest, applied: ['$map'], failed: { $big: '1' } });
  const first = createProjectionRunner({ store, logger, snapshot });
  await first.start();
  await first.caughtUp();
  await first.writeSnapshot();
  await first.stop();
  await store.close();

  store = createSqliteEventStore(path);
  const second = createProjectionRunner({ store, logger, snapshot });
  const folded: bigint[] = [];
  second.readModel.onChange((c) => folded.push(c.position));
  await second.start();
  await second.caughtUp();
  assert.deepEqual(folded, [], 'restored from the snapshot, nothing folded again');
  assert.deepEqual(second.readModel.get('h1')?.reported?.failed, { $big: '1' });
  assert.deepEqual(await verifyReadModel(store, second.readModel), []);
  await second.stop();
  await store.close();
});

test('the node gauges count liveness from the exact last-seen time when the ingest knows a newer one', async () => {
  const { createMetrics } = await import('../../src/metrics.ts');
  const { makeAliveSeen, streamOf } = await import('../../src/core/events/index.ts');
  const store = createMemoryEventStore();
  const seen = new Date('2026-11-29T14:00:00Z');
  await store.append([{ stream: streamOf('n1'), expected: 'any', events: [makeAliveSeen({ node: 'n1' }, seen)] }]);
  const now = seen.getTime() + 120_000; // the stored AliveSeen is two minutes old: past the grace
  const gauge = async (lastSeen?: (node: string) => Date | null): Promise<string> => {
    const metrics = createMetrics();
    const runner = createProjectionRunner({
      store,
      logger,
      metrics,
      graceMs: 60_000,
      now: () => now,
      ...(lastSeen ? { lastSeen } : {}),
    });
    await runner.start();
    await runner.caughtUp();
    await runner.refreshMetrics();
    await runner.stop();
    const text = await metrics.registry.getSingleMetricAsString('converge_nodes');
    return text.split('\n').find((l) => l.includes('undeclared') && / 1$/.test(l)) ?? '';
  };
  assert.match(await gauge(), /liveness="disconnected"/);
  // Alive is coalesced in the store (docs/design.md §2); the ingest heard the node 5 s ago.
  assert.match(await gauge(() => new Date(now - 5_000)), /liveness="connected"/);
});

test('an installation upgraded from <store>.snapshot.json starts warm on it, and the file is gone once <store>.snapshot is written', async (t) => {
  const dir = tempDir(t, 'converge-snap-former-');
  const path = join(dir, 'store.db');
  // The default names, as serve is configured.
  const config = loadConfig({ flags: { store: `sqlite:${path}` }, env: {} });
  assert.equal(config.snapshotPath, `${path}.snapshot`);
  assert.equal(config.snapshotFormerPath, `${path}.snapshot.json`);
  assert.equal(loadConfig({ flags: { store: `sqlite:${path}`, snapshot: join(dir, 'named') }, env: {} }).snapshotFormerPath, null);
  const store = createSqliteEventStore(path);
  const script = historyInStore(store);
  for (let i = 0; i < 6; i++) {
    script.tick();
    await script.alive(`f${i % 2}`);
  }
  // What the engine before the rename wrote at its stop.
  const before = createProjectionRunner({ store, logger, snapshot: { path: config.snapshotFormerPath!, everyEvents: 1_000 } });
  await before.start();
  await before.caughtUp();
  await before.writeSnapshot();
  await before.stop();
  assert.ok(existsSync(config.snapshotFormerPath!));

  const snapshot = { path: config.snapshotPath!, formerPath: config.snapshotFormerPath!, everyEvents: 1_000 };
  const after = createProjectionRunner({ store, logger, snapshot });
  const folded: bigint[] = [];
  after.readModel.onChange((c) => folded.push(c.position));
  await after.start();
  await after.caughtUp();
  assert.deepEqual(folded, [], 'restored from the former file: nothing folded again');
  assert.equal(after.readModel.size(), 2);
  script.tick();
  await script.alive('f2');
  await until('the new node folded', () => after.readModel.size() === 3);
  await after.writeSnapshot();
  await after.stop();
  assert.equal((await readSnapshot(config.snapshotPath!))?.position, 7n);
  assert.equal(existsSync(config.snapshotFormerPath!), false, 'the stale file under the former name is removed');
  await store.close();
});

test('a scrape answers while the store does not: the lag keeps its last reading, one head read at a time', async () => {
  const { createMetrics } = await import('../../src/metrics.ts');
  const { makeAliveSeen, streamOf } = await import('../../src/core/events/index.ts');
  const memory = createMemoryEventStore();
  await memory.append([{ stream: streamOf('n1'), expected: 'any', events: [makeAliveSeen({ node: 'n1' }, new Date())] }]);
  // The store cut off (packets dropped): a head read neither answers nor fails until the link heals.
  let cut = false;
  let reads = 0;
  let heal: (() => void) | null = null;
  /** Added to the head once healed, so the lag read after the heal shows. */
  let ahead = 0n;
  const store = new Proxy(memory, {
    get: (target, key, receiver) =>
      key === 'headPosition'
        ? async () => {
            reads++;
            if (cut) await new Promise<void>((resolve) => (heal = resolve));
            return ((await target.headPosition()) ?? 0n) + ahead;
          }
        : Reflect.get(target, key, receiver),
  });
  const metrics = createMetrics();
  const runner = createProjectionRunner({ store, logger, metrics, scrapeWaitMs: 20 });
  await runner.start();
  try {
    await runner.caughtUp();
    await runner.refreshMetrics();
    const lag = async (): Promise<string> =>
      (await metrics.registry.getSingleMetricAsString('converge_projection_lag_events')).split('\n').pop()!;
    assert.equal(await lag(), 'converge_projection_lag_events 0');
    const before = reads;

    cut = true;
    await memory.append([{ stream: streamOf('n2'), expected: 'any', events: [makeAliveSeen({ node: 'n2' }, new Date())] }]);
    let answered = 0;
    for (let i = 0; i < 3; i++) void runner.refreshMetrics().then(() => answered++);
    await until('three scrapes to answer while the store does not', () => answered === 3, 5_000);
    assert.equal(reads, before + 1, 'the scrapes share the one head read in flight');
    assert.equal(await lag(), 'converge_projection_lag_events 0');

    cut = false;
    ahead = 7n;
    (heal as (() => void) | null)?.();
    await until(
      'the lag read again once the store answers',
      async () => {
        await runner.refreshMetrics();
        return (await lag()) === 'converge_projection_lag_events 7';
      },
      5_000,
    );
  } finally {
    (heal as (() => void) | null)?.();
    await runner.stop();
    await memory.close();
  }
});

test('a scrape answers while the store fails: the lag keeps its last reading', async () => {
  const { createMetrics } = await import('../../src/metrics.ts');
  const memory = createMemoryEventStore();
  // The store refusing or dropping connections (a statement given up on, a host unreachable): a head read fails at once.
  let failing = false;
  const store = new Proxy(memory, {
    get: (target, key, receiver) =>
      key === 'headPosition'
        ? async () => {
            if (failing) throw new ConvergeError('CONVERGE_ERR_STORE_UNAVAILABLE', 'read postgres head: Query read timeout');
            return target.headPosition();
          }
        : Reflect.get(target, key, receiver),
  });
  const metrics = createMetrics();
  const runner = createProjectionRunner({ store, logger, metrics, scrapeWaitMs: 1_000 });
  await runner.start();
  try {
    await runner.caughtUp();
    await runner.refreshMetrics();
    failing = true;
    await runner.refreshMetrics();
    const lag = (await metrics.registry.getSingleMetricAsString('converge_projection_lag_events')).split('\n').pop();
    assert.equal(lag, 'converge_projection_lag_events 0');
  } finally {
    await runner.stop();
    await memory.close();
  }
});
