import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { foldRollouts } from '../../src/cli/commands/rolloutViewFromStore.ts';
import type { CliIo } from '../../src/cli/io.ts';
import { makeRolloutEvent, rolloutStreamOf } from '../../src/core/events/index.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createRolloutView } from '../../src/readModel/rollouts.ts';
import type { RolloutView } from '../../src/readModel/rollouts.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import type { RolloutTag, StoreHistory } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';
import { tempDir } from '../support/tempDir.ts';

// `converge rollout status` and `converge rollouts` answer from the rollouts' streams and their
// targets' (src/readModel/rolloutSlice.ts), not from a fold of the whole store. The answer must be
// the API's: the live rollout view over a read model folded from the store's first event.

const io: CliIo = {
  stdout: () => {},
  stderr: () => {},
  env: {},
  stderrIsTTY: false,
  readStdin: async () => Buffer.from(''),
  cwd: tmpdir(),
  interrupted: new Promise(() => {}),
};

/** The store, counting the events every read hands out, and the reads of every stream at once. */
function counting(store: EventStore): { store: EventStore; events: () => number; fullReads: () => number } {
  let events = 0;
  let fullReads = 0;
  return {
    store: {
      ...store,
      async *readAll(options) {
        if (options?.streamPrefix === undefined) fullReads++;
        for await (const batch of store.readAll(options)) {
          events += batch.length;
          yield batch;
        }
      },
      async *readColumns(options) {
        fullReads++;
        yield* store.readColumns(options);
      },
      async readStream(stream, options) {
        const out = await store.readStream(stream, options);
        events += out.length;
        return out;
      },
    },
    events: () => events,
    fullReads: () => fullReads,
  };
}

/** What the API's view answers: the read model folded from the store's first event, the view on it. */
async function apiView(store: EventStore): Promise<RolloutView> {
  const readModel = createReadModel();
  const view = createRolloutView(readModel);
  for await (const batch of store.readAll()) readModel.apply(batch);
  return view;
}

/** Everything the commands print of a rollout, and the node lists the API pages. */
function answer(v: RolloutView, id: string, now: number) {
  const outcomes = ['pending', 'done', 'refused', 'degraded', 'unsendable', 'superseded', 'skipped', 'unsent'] as const;
  return {
    state: v.get(id),
    summary: v.summary(id, now),
    nodes: v.nodes(id, { limit: 1_000 }),
    byOutcome: outcomes.map((outcome) => v.nodes(id, { outcome, limit: 1_000 })),
  };
}

const fleet = Array.from({ length: 40 }, (_, i) => `n${String(i).padStart(2, '0')}`);
const others = Array.from({ length: 20 }, (_, i) => `x${String(i).padStart(2, '0')}`);

/** A rollback of `id` sent to `nodes` (their previous spec again), as the driver records it. */
async function rollback(store: EventStore, h: StoreHistory, id: string, nodes: readonly string[], settle: boolean): Promise<void> {
  const stream = rolloutStreamOf(id);
  const at = (): string => h.now().toISOString();
  await store.append([
    {
      stream,
      expected: 'any',
      events: [makeRolloutEvent('RollbackStarted', { rollout: id, scope: 'all', wave: 0, by: 'ops', reason: 'bad', at: at() })],
    },
  ]);
  const sends = [];
  for (const n of nodes) {
    const [restored] = h.digests(n).slice(-2);
    const tag = { id, wave: 1, rollback: true } as RolloutTag;
    const s = await h.send(n, [{ id: 'web' }], tag);
    sends.push({
      node: n,
      serial: s.serial,
      digest: s.digest,
      restores: { serial: s.serial - 1, digest: restored!, specDigest: 'a'.repeat(64) },
    });
  }
  await store.append([
    { stream, expected: 'any', events: [makeRolloutEvent('RollbackSent', { rollout: id, sends, skipped: [], sentAt: at() })] },
  ]);
  await h.report(nodes[0]!, { declared: h.digests(nodes[0]!).at(-1) ?? null, applied: ['web'] });
  if (settle)
    await store.append([
      {
        stream,
        expected: 'any',
        events: [makeRolloutEvent('RollbackCompleted', { rollout: id, at: at(), done: 1, failed: 0, skipped: 0, failures: [] })],
      },
    ]);
}

/** Rollouts open, halted, completed, aborted and rolled back, over nodes with history before them and a fleet beside them. */
async function world(store: EventStore): Promise<StoreHistory> {
  const h = historyInStore(store);
  const converge = (n: string) => h.report(n, { declared: h.digests(n).at(-1) ?? null, applied: ['web'] });
  // History before any rollout: sends and reports, a stale report, an alive, a retirement, a node never heard from.
  for (const n of [...fleet, ...others]) {
    await h.send(n);
    h.tick(10);
    if (n !== 'n07') await converge(n);
  }
  for (const n of fleet.slice(0, 12)) {
    await h.send(n);
    await h.report(n, { declared: h.digests(n)[0] ?? null, applied: ['web'] });
    await h.alive(n);
  }
  for (const n of fleet.slice(0, 4)) await converge(n);
  await h.retire('n05');
  for (let i = 0; i < 5; i++) for (const n of others) await h.alive(n);

  // Open: wave 1 done, wave 2 sent with refused, degraded, pending, superseded, held and unsendable nodes.
  const open = rolloutInStore(store, h, 'open', fleet.slice(0, 20), { waves: '20%,100%', maxFailures: '50%', waveTimeoutMs: 3_600_000 });
  await open.start();
  await open.apply(await open.decide()); // wave 1 starts
  await open.skip(1, 'n03'); // unsendable
  await open.run();
  for (const n of fleet.slice(0, 4)) await converge(n);
  h.tick(2_000);
  await open.run();
  await h.report('n04', { declared: h.digests('n04').at(-1) ?? null, refused: 'no' });
  await h.report('n05', { declared: h.digests('n05').at(-1) ?? null, applied: [], failed: { web: 'crash' } });
  for (const n of fleet.slice(6, 12)) await converge(n);
  await h.send('n08'); // superseded: a newer send from elsewhere
  await h.report('n09', { declared: h.digests('n09')[0] ?? null, applied: ['web'] }); // a stale report while pending

  // Halted: a refusal over a budget of none.
  const halted = rolloutInStore(store, h, 'halted', fleet.slice(20, 26));
  await halted.start();
  await halted.apply(await halted.decide());
  await halted.skip(1, 'n25', 'held', 'held by ops');
  await halted.run();
  await h.report('n20', { declared: h.digests('n20').at(-1) ?? null, refused: 'policy' });
  for (const n of fleet.slice(21, 24)) await converge(n);
  await halted.run();

  // Completed, then one of its nodes sent again (superseded after the fact).
  const done = rolloutInStore(store, h, 'done', fleet.slice(26, 31), { waves: '40%,100%' });
  await done.start();
  await done.run();
  for (const n of fleet.slice(26, 28)) await converge(n);
  h.tick(1_000);
  await done.run();
  for (const n of fleet.slice(28, 31)) await converge(n);
  await done.run();
  await h.send('n30');

  // Aborted while its first wave was out.
  const aborted = rolloutInStore(store, h, 'aborted', fleet.slice(31, 34));
  await aborted.start();
  await aborted.run();
  await converge('n31');
  await aborted.abort('changed my mind');

  // Rolled back (and one rolling back still), some of their nodes in an earlier rollout too.
  const back = rolloutInStore(store, h, 'back', fleet.slice(34, 40));
  await back.start();
  await back.run();
  for (const n of fleet.slice(34, 37)) await converge(n);
  await rollback(store, h, 'back', fleet.slice(34, 38), true);
  const again = rolloutInStore(store, h, 'again', [...fleet.slice(0, 2), ...fleet.slice(36, 40)]);
  await again.start();
  await again.run();
  await converge('n00');
  await rollback(store, h, 'again', ['n00', 'n36'], false);

  // The fleet beside the rollouts goes on.
  for (let i = 0; i < 10; i++) for (const n of others) await h.alive(n);
  for (const n of others) await converge(n);
  return h;
}

test('rollout status and rollouts answer as the API does, from the rollouts and their targets only', async () => {
  const store = createMemoryEventStore();
  const h = await world(store);
  const now = h.now().getTime() + 60_000;
  const api = await apiView(store);
  const total = Number(await store.headPosition());
  const ids = api.list().map((r) => r.id);
  assert.deepEqual([...ids].sort(), ['aborted', 'again', 'back', 'done', 'halted', 'open']);
  assert.deepEqual(
    ids.map((id) => api.get(id)?.status),
    ids.map(
      (id) => ({ open: 'running', halted: 'halted', done: 'completed', aborted: 'aborted', back: 'rolledBack', again: 'rollingBack' })[id],
    ),
    'the world has a rollout in each state',
  );
  assert.ok(
    (api.summary('open', now)?.totals.superseded ?? 0) > 0 &&
      (api.nodes('open', { outcome: 'unsendable', limit: 10 })?.nodes.length ?? 0) > 0 &&
      (api.nodes('halted', { outcome: 'skipped', limit: 10 })?.nodes.length ?? 0) > 0,
  );

  for (const id of ids) {
    const c = counting(store);
    const slice = await foldRollouts(c.store, io, { snapshotPath: null }, id);
    assert.deepEqual(answer(slice.rollouts, id, now), answer(api, id, now), `rollout status ${id}`);
    assert.equal(c.fullReads(), 0, `rollout status ${id} read the whole store`);
    assert.ok(c.events() < total / 2, `rollout status ${id} read ${c.events()} of the store's ${total} events`);
  }
  const c = counting(store);
  const all = await foldRollouts(c.store, io, { snapshotPath: null }, null);
  assert.deepEqual(all.rollouts.list(), api.list());
  for (const id of ids) assert.deepEqual(answer(all.rollouts, id, now), answer(api, id, now), `rollouts: ${id}`);
  assert.equal(c.fullReads(), 0, 'rollouts read the whole store');
  assert.ok(c.events() < total, `rollouts read ${c.events()} of the store's ${total} events`);
});

test('the commands print the API view of a SQLite store', async (t) => {
  const dir = tempDir(t, 'converge-rollout-slice-');
  const path = join(dir, 'store.db');
  const store = createSqliteEventStore(path);
  try {
    await world(store);
    const api = await apiView(store);
    // Ended rollouts only: an open one's estimate moves with the clock between the two answers.
    for (const id of ['halted', 'done', 'aborted', 'back']) {
      const r = await cliIn(dir, ['rollout', 'status', id, '--json', '--store', `sqlite:${path}`]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), JSON.parse(JSON.stringify(api.summary(id, Date.now()))), `rollout status ${id}`);
    }
    const r = await cliIn(dir, ['rollouts', '--json', '--store', `sqlite:${path}`]);
    assert.equal(r.code, 0, r.stderr);
    // JSON lines, newest first; the open ones' estimates move with the clock.
    const listed = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { rollout: string; eta: unknown });
    assert.deepEqual(
      listed.map((x) => x.rollout),
      api.list().map((x) => x.id),
    );
    const ended = (x: { rollout: string }): boolean => ['halted', 'done', 'aborted', 'back'].includes(x.rollout);
    assert.deepEqual(
      listed.filter(ended),
      api.list().flatMap((x) => {
        const s = api.summary(x.id, Date.now());
        return s !== undefined && ended(s) ? [JSON.parse(JSON.stringify(s))] : [];
      }),
    );
  } finally {
    await store.close();
  }
});
