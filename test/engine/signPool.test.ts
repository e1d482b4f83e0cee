import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import { getPriority } from 'node:os';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { createBatchSender } from '../../src/engine/sendBatch.ts';
import type { BatchItem, SendManyOptions } from '../../src/engine/sendBatch.ts';
import { createSignPool, defaultSignNice } from '../../src/engine/signPool.ts';
import type { SignPool } from '../../src/engine/signPool.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { historyInStore, testKey } from '../support/history.ts';
import { until } from '../support/until.ts';

// The bulk sender's declarations signed on a thread of their own (signPool.ts, sendSigning.ts):
// the events recorded are byte for byte those the engine thread records for the same nodes,
// serials, resources and time, whether the thread signs them in the call or ahead of it; and a
// thread that throws, exits or answers nonsense costs a send nothing: it is signed here instead,
// once.

const now = () => new Date('2026-11-30T14:00:00.123Z');
const web = [
  { id: 'web', image: 'registry.local/web:2', ports: [8080] },
  { id: 'sidecar', image: 'registry.local/envoy:1' },
];
const db = [{ id: 'db', image: 'registry.local/pg:16' }];
const batch = (from: number, n: number, resources: unknown = web): BatchItem[] =>
  Array.from({ length: n }, (_, i) => ({ node: `n-${String(from + i).padStart(3, '0')}`, resources }));
const rollout = { id: 'r1', wave: 2 } as const;

/** Every DeclarationSent in the store, as stored (id, type, data), in the order they were appended. */
async function recorded(store: EventStore): Promise<string[]> {
  const out: string[] = [];
  for await (const page of store.readAll({ after: null }))
    for (const e of page)
      if (e.type === 'DeclarationSent') out.push(JSON.stringify({ stream: e.stream, id: e.id, type: e.type, data: e.data }));
  return out;
}

/** A store whose nodes n-000 and n-001 were sent twice already (serial 3 next) and n-002 reported. */
async function seeded(): Promise<EventStore> {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.send('n-000');
  await h.send('n-000');
  await h.send('n-001');
  await h.send('n-001');
  await h.report('n-002', { carried: [] });
  return store;
}

/** A pool whose thread has loaded: the sender signs there from its first call. */
async function loaded(pool: SignPool): Promise<SignPool> {
  pool.start();
  await until('the signing thread loaded', () => pool.ready());
  return pool;
}

/** The pool, with every request it is asked counted (its size). */
function counted(pool: SignPool): { pool: SignPool; asked: number[] } {
  const asked: number[] = [];
  return { pool: { ...pool, sign: (at, items) => (asked.push(items.length), pool.sign(at, items)) }, asked };
}

/** The calls, made on a store with a sender of the given pool (none: signed on this thread). */
async function run(
  pool: SignPool | undefined,
  calls: readonly (readonly [readonly BatchItem[], SendManyOptions])[],
  between?: (store: EventStore, call: number) => Promise<void>,
): Promise<{ events: string[]; ats: string[] }> {
  const store = await seeded();
  const sender = createBatchSender({ store, key: testKey, now, ...(pool === undefined ? {} : { signPool: pool }) });
  const ats: string[] = [];
  for (const [k, [items, opts]] of calls.entries()) {
    const r = await sender.sendMany(items, { ...opts, extra: (_s, _r, at) => (ats.push(at.toISOString()), []) });
    assert.ok(
      r.outcomes.every((o) => o.ok),
      JSON.stringify(r.outcomes.filter((o) => !o.ok)),
    );
    await between?.(store, k);
  }
  return { events: await recorded(store), ats };
}

test('the signing thread records the same DeclarationSent events, byte for byte, as the engine thread, ahead or not', async () => {
  const { pool, asked } = counted(await loaded(createSignPool({ key: testKey })));
  try {
    const calls = [
      [[...batch(0, 40), ...batch(40, 10, db)], { rollout, now: now(), ahead: batch(50, 60) }],
      [batch(50, 60), { rollout, now: now() }],
      [batch(110, 7, db), { now: now() }],
    ] as const;
    const here = await run(undefined, calls);
    const there = await run(pool, calls);
    assert.equal(there.events.length, 4 + 117);
    assert.deepEqual(there.events, here.events);
    assert.deepEqual(there.ats, here.ats);
    // The second call was signed while the first was recorded: it asked the thread nothing.
    assert.deepEqual(asked, [50, 60, 7]);
    assert.ok(pool.usable());
  } finally {
    await pool.close();
  }
});

test('a node whose serial moved after it was signed ahead is signed again at its new serial, the rest taken as signed', async () => {
  const { pool, asked } = counted(await loaded(createSignPool({ key: testKey })));
  try {
    const calls = [
      [batch(0, 5), { rollout, now: now(), ahead: batch(5, 5) }],
      [batch(5, 5), { rollout, now: now() }],
    ] as const;
    // Another send reaches n-007 between the calls: its next serial is 2, not the 1 signed ahead.
    const between = async (store: EventStore, call: number) => {
      if (call === 0) await historyInStore(store).send('n-007');
    };
    const here = await run(undefined, calls, between);
    const there = await run(pool, calls, between);
    assert.deepEqual(there.events, here.events);
    assert.equal(JSON.parse(there.events.find((e) => e.includes('"n-007"') && e.includes('"rollout"'))!).data.serial, 2);
    assert.deepEqual(asked, [5, 5, 1]);
  } finally {
    await pool.close();
  }
});

for (const [what, body] of [
  ['throws', `parentPort.on('message', () => { throw new Error('boom'); });`],
  ['exits', `parentPort.on('message', () => process.exit(7));`],
  [
    'answers what was not asked',
    `parentPort.on('message', (m) => parentPort.postMessage({ id: m.id, digests: [], declarations: [], signatures: [] }));`,
  ],
  // Takes the call's own request, then dies with the batch asked ahead of the next call.
  [
    'dies with a batch signed ahead',
    `let n = 0; parentPort.on('message', () => { if (++n === 2) setTimeout(() => process.exit(1), 10); });`,
  ],
] as const) {
  test(`a signing thread that ${what} fails no send and repeats none: the engine thread signs them, once`, async () => {
    const failures: string[] = [];
    const pool = createSignPool({
      key: testKey,
      onFailure: (err) => failures.push(err.message),
      spawn: (data) =>
        new Worker(`const { parentPort } = require('node:worker_threads'); parentPort.postMessage('ready'); ${body}`, {
          eval: true,
          workerData: data,
        }),
    });
    await loaded(pool);
    try {
      const calls = [
        [batch(0, 20), { rollout, now: now(), ahead: batch(20, 20) }],
        [batch(20, 20), { rollout, now: now(), ahead: batch(40, 5) }],
        [batch(40, 5), { rollout, now: now() }],
      ] as const;
      const done = run(pool, calls);
      const there = await done;
      const here = await run(undefined, calls);
      assert.deepEqual(there.events, here.events);
      // The 4 sends seeded and 45 of the calls', each once.
      assert.equal(there.events.length, 49);
      assert.equal(new Set(there.events.map((e) => JSON.parse(e).id)).size, 49);
      assert.equal(failures.length, 1, failures.join('; '));
      assert.equal(pool.usable(), false);
      await assert.rejects(pool.sign(now(), []));
    } finally {
      await pool.close();
    }
  });
}

test('closing the pool stops its thread and rejects what it had not answered; a later request starts another', async () => {
  const threads: Worker[] = [];
  // A thread that never answers: what it was asked is still waiting when the pool closes.
  const pool = createSignPool({
    key: testKey,
    spawn: (data) => {
      const w = new Worker(`require('node:worker_threads').parentPort.on('message', () => {});`, { eval: true, workerData: data });
      threads.push(w);
      return w;
    },
  });
  for (const n of [1, 2]) {
    const waiting = pool.sign(now(), [{ node: 'a', serial: 1, resources: [] }]).then(
      () => 'answered',
      (err: Error) => err.message,
    );
    assert.equal(threads.length, n);
    const exited = once(threads[n - 1]!, 'exit');
    await pool.close();
    await exited;
    assert.match(await waiting, /closed/);
    assert.ok(pool.usable());
  }
});

test('the signing thread runs below the engine thread: the cores go to the API, ingest and the fleet first (Linux)', async () => {
  /** The nice of each thread of this process, from its stat (the 19th field). */
  const nices = (): number[] =>
    readdirSync('/proc/self/task').flatMap((tid) => {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        return [Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
      } catch {
        return []; // a thread that ended meanwhile
      }
    });
  const mine = getPriority();
  const pool = createSignPool({ key: testKey });
  try {
    await pool.sign(now(), [{ node: 'a', serial: 1, resources: [] }]);
    assert.ok(nices().includes(Math.min(19, mine + defaultSignNice)), `threads at ${nices().join(', ')}, this one at ${mine}`);
  } finally {
    await pool.close();
  }
});

test('a signing thread still loading is not waited for: the sends are signed here meanwhile', async () => {
  // A thread that never says it has loaded (under tsx a real one takes a few hundred ms).
  const { pool, asked } = counted(
    createSignPool({
      key: testKey,
      spawn: (data) => new Worker(`require('node:worker_threads').parentPort.on('message', () => {});`, { eval: true, workerData: data }),
    }),
  );
  try {
    const calls = [
      [batch(0, 5), { rollout, now: now(), ahead: batch(5, 5) }],
      [batch(5, 5), { rollout, now: now() }],
    ] as const;
    const there = await run(pool, calls);
    assert.deepEqual(there.events, (await run(undefined, calls)).events);
    assert.deepEqual(asked, []);
    assert.ok(pool.usable());
  } finally {
    await pool.close();
  }
});
