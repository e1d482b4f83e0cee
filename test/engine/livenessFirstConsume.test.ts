import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { makeObservationStarted, observationStream, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { IngestSource, LinkListener } from '../../src/transport/port.ts';
import { recordObservation } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// docs/design.md §3 "Cut off from the broker": an engine whose ingest cannot consume observes
// nothing, from its start too. Until its source first consumes (consumer setup failing over and
// over at start) no span is recorded, the lease's flush time is not moved, and no silence is judged;
// from the first consuming the span starts and every node is judged a grace from it. The sweep's
// interval is mocked, so "no sweep judged" is asked after sweeps that would have run.

const T0 = Date.parse('2026-03-01T00:00:00Z');
const graceMs = 200;
/** The observer's sweep interval at this grace (a quarter of it, at least 50 ms). */
const sweepMs = 50;
const iso = (ms: number): string => new Date(ms).toISOString();

/** A source whose consumers are not set up until `consume()`; a stop before that fails its start. */
function stuckSource() {
  let link: LinkListener | undefined;
  let called = false;
  let settle: { resolve: () => void; reject: (e: Error) => void } | null = null;
  const source: IngestSource = {
    start: (_onDelivery, onLink) => {
      link = onLink;
      called = true;
      return new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    },
    ack: () => undefined,
    isLive: () => true,
    deadLetter: async () => undefined,
    reject: () => undefined,
    pause: async () => undefined,
    stop: async () => settle?.reject(new Error('ingest channel stopped')),
  };
  return {
    source,
    started: () => called,
    consume: () => {
      link?.('consuming');
      settle?.resolve();
    },
  };
}

async function rig(store: EventStore, wall = T0) {
  const clock = { wall, mono: 0 };
  const stuck = stuckSource();
  const ingest = createIngest({
    store,
    source: stuck.source,
    logger,
    flushMs: 1,
    now: () => new Date(clock.wall),
    liveness: { engine: 'e1', graceMs, flushMs: 100, mono: () => clock.mono },
  });
  const tick = (ms: number): number => {
    clock.wall += ms;
    clock.mono += ms;
    return clock.wall;
  };
  const starting = ingest.start();
  starting.catch(() => undefined);
  await until('the source asked to start', () => stuck.started());
  return { ingest, stuck, clock, tick, starting };
}

const spans = async (store: EventStore): Promise<Recorded[]> => [...(await store.readStream(observationStream))];
const shape = (events: readonly Recorded[]) =>
  events.map((e) =>
    e.type === 'ObservationStarted'
      ? `started ${e.data.at} lastFlushAt ${e.data.lastFlushAt}`
      : e.type === 'ObservationStopped'
        ? `stopped ${e.data.why} ${e.data.at}`
        : e.type,
  );

test('before ingest first consumes no silence is judged and no span recorded; from the first consuming, both', async (t) => {
  mock.timers.enable({ apis: ['setInterval'] });
  t.after(() => mock.timers.reset());
  const store = createMemoryEventStore();
  // n1 heard before this engine started (another run's lease).
  await store.saveLastSeen('e0', T0 - 1_000, [['n1', T0 - 1_000]]);
  const r = await rig(store);

  r.tick(10 * graceMs);
  mock.timers.tick(20 * sweepMs);
  assert.equal(r.ingest.stats().pending, 0, 'no silence handed to ingest while nothing is consumed');
  assert.deepEqual(shape(await spans(store)), [], 'no span: nothing observed yet');
  assert.equal(r.ingest.observedSince(), null, 'the rollout driver holds timeouts: no report can arrive');
  assert.equal((await store.loadLastSeen()).flushes.get('e1'), undefined, 'the lease not flushed');

  const consumedAt = r.tick(1);
  const consumedMono = r.clock.mono;
  r.stuck.consume();
  await r.starting;
  assert.equal(r.ingest.observedSince(), consumedMono, 'observed since the first consuming, not the start');
  await until('the span started', async () => (await spans(store)).length === 1);
  assert.deepEqual(shape(await spans(store)), [`started ${iso(consumedAt)} lastFlushAt null`]);

  r.tick(graceMs - 1);
  mock.timers.tick(4 * sweepMs);
  assert.equal(r.ingest.stats().pending, 0, 'within the grace of the first consuming: not yet silent');
  r.tick(1);
  mock.timers.tick(sweepMs);
  const silent = await until('n1 judged silent', async () => (await store.readStream(streamOf('n1'))).find((e) => e.type === 'NodeSilent'));
  assert.ok(silent.type === 'NodeSilent');
  assert.equal(silent.data.lastSeenAt, iso(T0 - 1_000), 'its true last-seen time');
  assert.equal(silent.data.observedAt, iso(consumedAt + graceMs), 'a grace after the first consuming');
  await r.ingest.stop();
  assert.deepEqual(
    (await spans(store)).map((e) => e.type),
    ['ObservationStarted', 'ObservationStopped'],
  );
});

test('stopped before ingest ever consumed: no stop recorded, the crashed span still closed at its last flush by the next start', async (t) => {
  mock.timers.enable({ apis: ['setInterval'] });
  t.after(() => mock.timers.reset());
  const store = createMemoryEventStore();
  // e1's previous run was killed: its span open, its last flush at T0 - 2 s.
  await recordObservation(store, makeObservationStarted('e1', T0 - 5_000, graceMs, null));
  await store.saveLastSeen('e1', T0 - 2_000, [['n1', T0 - 3_000]]);

  const r = await rig(store, T0 + 60_000);
  r.tick(10 * graceMs);
  mock.timers.tick(20 * sweepMs);
  await r.ingest.stop();
  await assert.rejects(r.starting);
  assert.deepEqual(shape(await spans(store)), [`started ${iso(T0 - 5_000)} lastFlushAt null`], 'no stop without a start');
  assert.equal((await store.loadLastSeen()).flushes.get('e1'), T0 - 2_000, 'the crashed run’s flush kept');
  assert.deepEqual(await store.readStream(streamOf('n1')), [], 'no silence');

  const next = await rig(store, T0 + 120_000);
  const consumedAt = next.tick(5_000);
  next.stuck.consume();
  await next.starting;
  await until('the span started', async () => (await spans(store)).length === 2);
  assert.deepEqual(shape(await spans(store)).at(-1), `started ${iso(consumedAt)} lastFlushAt ${iso(T0 - 2_000)}`);
  await next.ingest.stop();
});
