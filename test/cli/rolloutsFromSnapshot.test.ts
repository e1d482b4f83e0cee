import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { foldRollouts } from '../../src/cli/commands/rolloutViewFromStore.ts';
import type { CliIo } from '../../src/cli/io.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// `converge rollouts` and `rollout status` folded the whole store on every call. They now start
// from the engine's snapshot when it passes the warm start's checks and read only what came after
// it; the answers are the same as a fold from zero, and a snapshot that fails a check is said on
// stderr and not used.

const nodes = Array.from({ length: 30 }, (_, i) => `n${String(i).padStart(2, '0')}`);

function quietIo(dir: string): CliIo & { err: () => string } {
  let stderr = '';
  return {
    stdout: () => {},
    stderr: (t) => void (stderr += t),
    env: {},
    stderrIsTTY: false,
    readStdin: async () => Buffer.from(''),
    cwd: dir,
    interrupted: new Promise(() => {}),
    err: () => stderr,
  };
}

/** The store's readAll, counting the events it hands out of every stream but the rollouts'. */
function counting(store: EventStore): { store: EventStore; read: () => number } {
  let read = 0;
  return {
    store: {
      ...store,
      async *readAll(options) {
        for await (const batch of store.readAll(options)) {
          if (options?.streamPrefix === undefined) read += batch.length;
          yield batch;
        }
      },
    },
    read: () => read,
  };
}

const view = (f: Awaited<ReturnType<typeof foldRollouts>>) => ({
  nodes: [...f.readModel.nodes()].sort((a, b) => a.node.localeCompare(b.node)),
  rollouts: f.rollouts.list().map((r) => f.rollouts.summary(r.id, 0)),
});

test('the rollout commands start from a trusted snapshot, read only what came after it, and answer as a fold from zero', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-rollouts-snapshot-'));
  const path = join(dir, 'store.db');
  const store = createSqliteEventStore(path);
  try {
    const h = historyInStore(store);
    for (const n of nodes) await h.send(n);
    const r = rolloutInStore(store, h, 'r1', nodes, { waves: '10%,100%' });
    await r.start();
    await r.run();
    for (const n of nodes.slice(0, 3)) await h.report(n, { declared: h.digests(n).at(-1) ?? null, applied: ['web'] });
    const runner = createProjectionRunner({
      store,
      logger: pino({ level: 'silent' }),
      snapshot: { path: `${path}.snapshot`, everyEvents: 1_000_000 },
    });
    await runner.start();
    await runner.caughtUp();
    await runner.writeSnapshot();
    await runner.stop();
    const atSnapshot = (await store.headPosition())!;
    await r.run();
    for (const n of nodes.slice(3, 6)) await h.report(n, { declared: h.digests(n).at(-1) ?? null, applied: ['web'] });
    const after = Number((await store.headPosition())! - atSnapshot);

    const io = quietIo(dir);
    const fromZero = await foldRollouts(store, io, { snapshotPath: null });
    const c = counting(store);
    const warm = await foldRollouts(c.store, io, { snapshotPath: 'store.db.snapshot' });
    assert.equal(io.err(), '');
    assert.deepEqual(view(warm), view(fromZero));
    // And the one at the snapshot's position, which the identity check reads.
    assert.equal(
      c.read(),
      after + 1,
      `only the ${after} events after the snapshot are read, not the store's ${atSnapshot + BigInt(after)}`,
    );

    // A byte changed in the snapshot: not used, said, and the answer is still the store's.
    const file = readFileSync(`${path}.snapshot`);
    file.writeUInt8(file.readUInt8(file.length - 10) ^ 0xff, file.length - 10);
    writeFileSync(`${path}.snapshot`, file);
    const io2 = quietIo(dir);
    const c2 = counting(store);
    const cold = await foldRollouts(c2.store, io2, { snapshotPath: 'store.db.snapshot' });
    assert.match(io2.err(), /snapshot .*store\.db\.snapshot not used \(\w+\): folding the whole store/);
    assert.deepEqual(view(cold), view(fromZero));
    assert.equal(BigInt(c2.read()), atSnapshot + BigInt(after));
  } finally {
    await store.close();
  }
});
