import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { foldRollouts } from '../../src/cli/commands/rolloutViewFromStore.ts';
import type { CliIo } from '../../src/cli/io.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createRolloutView } from '../../src/readModel/rollouts.ts';
import type { RolloutView } from '../../src/readModel/rollouts.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';
import { tempDir } from '../support/tempDir.ts';

// `converge rollouts` and `rollout status` start from the engine's snapshot when it passes the warm
// start's checks and read only what came after it; the answers are the same as a fold from zero,
// and a snapshot that fails a check is said on stderr and not used: the rollouts' targets are read
// instead (rolloutSlice.test.ts), never the whole store.

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

type Folded = Pick<Awaited<ReturnType<typeof foldRollouts>>, 'readModel' | 'rollouts'>;
const view = (f: Folded) => ({
  rollouts: f.rollouts.list().map((r) => f.rollouts.summary(r.id, 0)),
});
const withNodes = (f: Folded) => ({
  ...view(f),
  nodes: [...f.readModel.nodes()].sort((a, b) => a.node.localeCompare(b.node)),
});

test('the rollout commands start from a trusted snapshot, read only what came after it, and answer as a fold from zero', async (t) => {
  const dir = tempDir(t, 'converge-rollouts-snapshot-');
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
    // The reference: the store folded from its first event, the view on it.
    const fromZero = { readModel: createReadModel(), rollouts: undefined as unknown as RolloutView };
    fromZero.rollouts = createRolloutView(fromZero.readModel);
    for await (const batch of store.readAll()) fromZero.readModel.apply(batch);
    const c = counting(store);
    const warm = await foldRollouts(c.store, io, { snapshotPath: 'store.db.snapshot' }, null);
    assert.equal(io.err(), '');
    assert.deepEqual(withNodes(warm), withNodes(fromZero));
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
    const cold = await foldRollouts(c2.store, io2, { snapshotPath: 'store.db.snapshot' }, null);
    assert.match(io2.err(), /snapshot .*store\.db\.snapshot not used \(\w+\): reading the rollouts' targets/);
    assert.deepEqual(view(cold), view(fromZero));
    assert.equal(c2.read(), 0, 'the whole store is not read');
  } finally {
    await store.close();
  }
});
