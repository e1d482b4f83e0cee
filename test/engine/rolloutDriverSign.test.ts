import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { createRolloutDriver } from '../../src/engine/rolloutDriver.ts';
import { startRollout } from '../../src/engine/rolloutCommands.ts';
import type { DeclarationSent, RolloutSentData } from '../../src/core/events/index.ts';
import { createSignPool } from '../../src/engine/signPool.ts';
import type { SignPool } from '../../src/engine/signPool.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { oneWaveRollout } from '../support/oneWaveRollout.ts';
import { until } from '../support/until.ts';

// The driver signs a wave's declarations on its signing thread (src/engine/signPool.ts), each
// batch while the one before is appended: every node is sent once, each RolloutSent says the time
// its declarations carry, and the thread is gone once the driver stops.

/** Threads of this process now (Linux). */
const threads = (): number => readdirSync('/proc/self/task').length;

test('a wave signed on the driver’s thread: one declaration a node, listed at its time; the thread stops with the driver', async () => {
  // The libuv pool starts at the first file read: started before counting.
  await readFile(new URL(import.meta.url));
  const before = threads();
  const store = createMemoryEventStore();
  let t = Date.parse('2026-11-30T12:00:00Z');
  // A clock that moves: a batch signed ahead carries the time it was signed at, not its append's.
  const now = (): Date => new Date((t += 7));
  const nodes = Array.from({ length: 1_700 }, (_, i) => `n${String(i + 1).padStart(4, '0')}`);
  await startRollout({ store, now, nodeStates: () => [] }, { ...oneWaveRollout('r', nodes, 600_000), startedBy: 'test' });
  // Loaded before the driver starts, so every batch is signed there (one still loading is not waited for).
  const pool = createSignPool({ key: testKey });
  pool.start();
  await until('the signing thread loaded', () => pool.ready());
  // What the thread is asked and what the store appends, in order.
  const steps: string[] = [];
  const signPool: SignPool = { ...pool, sign: (at, items) => (steps.push(`sign ${items.length}`), pool.sign(at, items)) };
  const append = store.append.bind(store);
  store.append = (writes) => {
    const n = writes.filter((w) => w.events.some((e) => e.type === 'DeclarationSent')).length;
    if (n > 0) steps.push(`append ${n}`);
    return append(writes);
  };
  const driver = createRolloutDriver({ store, key: testKey, logger, now, nodeOf: () => undefined, signPool });
  let most = before;
  driver.start();
  try {
    await until('every node sent to', async () => {
      most = Math.max(most, threads());
      const listed = (await store.readStream('rollout-r')).filter((e) => e.type === 'RolloutSent');
      return listed.reduce((n, e) => n + (e.data as RolloutSentData).sends.length, 0) === nodes.length;
    });
  } finally {
    await driver.stop();
  }
  assert.ok(most > before, 'the signing thread ran');
  // Each batch asked of the thread once; the second while the first was still to be appended (signed ahead).
  assert.deepEqual(
    steps.filter((x) => x.startsWith('sign')),
    ['sign 500', 'sign 500', 'sign 500', 'sign 200'],
  );
  assert.deepEqual(steps.slice(0, 3), ['sign 500', 'sign 500', 'append 500']);
  const declared = new Map<string, DeclarationSent['data']>();
  for await (const page of store.readAll({ after: null }))
    for (const e of page)
      if (e.type === 'DeclarationSent') {
        const d = e.data as DeclarationSent['data'];
        assert.ok(!declared.has(d.node), `${d.node} was sent twice`);
        declared.set(d.node, d);
      }
  assert.equal(declared.size, nodes.length);
  for (const e of await store.readStream('rollout-r')) {
    if (e.type !== 'RolloutSent') continue;
    const data = e.data as RolloutSentData;
    for (const s of data.sends) {
      const d = declared.get(s.node)!;
      assert.equal(d.digest, s.digest);
      assert.equal(d.sentAt, data.sentAt, `${s.node} carries the time its RolloutSent says`);
    }
  }
  await until('the signing thread stopped', () => threads() <= before, 30_000);
});
