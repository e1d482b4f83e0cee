import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isObserved, observedSpans } from '../../projections/index.ts';
import { observationStream } from '../../src/core/events/index.ts';
import type { NodeSilent, Recorded } from '../../src/core/events/index.ts';
import { createLivenessObserver } from '../../src/engine/liveness/observer.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore, NewEvent } from '../../src/store/index.ts';
import { logger } from '../support/logger.ts';
import { sleep, until } from '../support/until.ts';

// docs/design.md §3 "Not observed": while ingest cannot consume (the broker link lost) the engine
// hears no node, so the observer closes its span ('broker-lost') at the moment it is told, judges
// no silence, and when consuming resumes starts a span again with every node judged afresh a grace
// from the resume. Both clocks are the test's; the sweep and the flush run on real timers.

const T0 = Date.parse('2026-03-01T00:00:00Z');
const graceMs = 200;
const iso = (ms: number): string => new Date(ms).toISOString();

/** A store whose writes fail while `down` (reads still answer). */
function flakyStore(): { store: EventStore; down: { on: boolean } } {
  const inner = createMemoryEventStore();
  const down = { on: false };
  const refuse = (): Promise<never> => Promise.reject(new Error('store down'));
  const store: EventStore = {
    ...inner,
    append: (...a) => (down.on ? refuse() : inner.append(...a)),
    saveLastSeen: (...a) => (down.on ? refuse() : inner.saveLastSeen(...a)),
  };
  return { store, down };
}

function rig(store: EventStore = createMemoryEventStore(), engine = 'e1') {
  const clock = { wall: T0, mono: 0 };
  const silences: NewEvent<NodeSilent>[] = [];
  const observer = createLivenessObserver({
    store,
    logger,
    engine,
    graceMs,
    flushMs: 100,
    enqueue: (events) => silences.push(...events),
    now: () => clock.wall,
    mono: () => clock.mono,
  });
  const tick = (ms: number): number => {
    clock.wall += ms;
    clock.mono += ms;
    return clock.wall;
  };
  const heard = (node: string) => observer.recorder.heard(node, clock.wall, clock.mono);
  const spans = async (): Promise<Recorded[]> => [...(await store.readStream(observationStream))];
  return { store, observer, clock, tick, heard, silences, spans };
}

const atOf = (e: Recorded): string => (e.type === 'ObservationStarted' || e.type === 'ObservationStopped' ? e.data.at : '');
const shape = (events: readonly Recorded[]) =>
  events.map((e) => (e.type === 'ObservationStopped' ? `stopped ${e.data.why} ${e.data.at}` : `${e.type} ${atOf(e)}`));

test('lost: the span closes then, no silence is judged however long; resumed: a span starts, silence a grace from it', async () => {
  const r = rig();
  await r.observer.start();
  r.observer.consuming();
  const seen = r.clock.wall;
  r.heard('n1');
  r.heard('n2');
  const lostAt = r.tick(50);
  r.observer.lost();
  r.tick(100 * graceMs);
  // Sweeps are every 50 ms: several would have run, were the sweep judging.
  await sleep(400);
  assert.equal(r.silences.length, 0, 'no silence while no node could be heard');
  await until('the stop recorded', async () => (await r.spans()).length === 2);

  const resumedAt = r.tick(1_000);
  r.observer.consuming();
  await until('the start recorded', async () => (await r.spans()).length === 3);
  assert.deepEqual(shape(await r.spans()), [
    `ObservationStarted ${iso(T0)}`,
    `stopped broker-lost ${iso(lostAt)}`,
    `ObservationStarted ${iso(resumedAt)}`,
  ]);
  r.tick(graceMs - 1);
  await sleep(200);
  assert.equal(r.silences.length, 0, 'within the grace of the resume: not yet silent');
  // n2 is heard again: a NodeHeard, as after a start, naming when it was heard before the loss.
  const again = r.heard('n2');
  assert.equal(again?.type, 'NodeHeard');
  assert.equal(again?.type === 'NodeHeard' && again.data.lastSeenBefore, iso(seen));
  r.tick(1);
  await until('n1 judged silent', () => r.silences.length > 0);
  assert.deepEqual(
    r.silences.map((e) => [e.data.node, e.data.lastSeenAt, e.data.observedAt]),
    [['n1', iso(seen), iso(resumedAt + graceMs)]],
    'silent a grace after the resume, with its true last-seen time',
  );
  await r.observer.stop();
  assert.equal((await r.spans()).at(-1)?.type, 'ObservationStopped');
});

test('stopped while the link is lost: one stop (the loss), no throw, the lease kept at the loss', async () => {
  const r = rig();
  await r.observer.start();
  r.observer.consuming();
  r.heard('n1');
  const lostAt = r.tick(50);
  r.observer.lost();
  r.observer.lost();
  r.tick(5_000);
  await r.observer.stop();
  await r.observer.stop();
  r.observer.consuming();
  assert.deepEqual(shape(await r.spans()), [`ObservationStarted ${iso(T0)}`, `stopped broker-lost ${iso(lostAt)}`]);
  assert.equal((await r.store.loadLastSeen()).flushes.get('e1'), lostAt, 'observed only until the loss');
});

test('a blip: stop and start each recorded, the start after the stop, even within one millisecond', async () => {
  const r = rig();
  await r.observer.start();
  r.observer.consuming();
  for (let i = 0; i < 3; i++) {
    r.observer.lost();
    r.observer.consuming();
  }
  await r.observer.stop();
  const spans = await r.spans();
  assert.deepEqual(
    spans.map((e) => (e.type === 'ObservationStopped' ? e.data.why : 'started')),
    ['started', 'broker-lost', 'started', 'broker-lost', 'started', 'broker-lost', 'started', 'stopped'],
  );
  const times = spans.map((e) => Date.parse(atOf(e)));
  assert.deepEqual(
    times,
    [...times].sort((a, b) => a - b),
    'in time order',
  );
  assert.equal(new Set(times).size, times.length, 'no two at one time');
  const open = observedSpans(spans);
  assert.equal(isObserved(open, times[1]! + 0.5), false, 'the blip reads not observed');
});

test('the store down when the link is lost: the stop and the start land later, in order', async () => {
  const { store, down } = flakyStore();
  const r = rig(store);
  await r.observer.start();
  r.observer.consuming();
  r.heard('n1');
  down.on = true;
  const lostAt = r.tick(50);
  r.observer.lost();
  const resumedAt = r.tick(1_000);
  r.observer.consuming();
  // Flushes (every 100 ms) retry; let a few fail.
  await sleep(300);
  down.on = false;
  await until('both recorded', async () => (await r.spans()).length === 3);
  assert.deepEqual(shape(await r.spans()), [
    `ObservationStarted ${iso(T0)}`,
    `stopped broker-lost ${iso(lostAt)}`,
    `ObservationStarted ${iso(resumedAt)}`,
  ]);
  await r.observer.stop();
});

test('the store down from the loss through the stop: the next start closes the span no later than the loss', async () => {
  const { store, down } = flakyStore();
  const r = rig(store);
  await r.observer.start();
  r.observer.consuming();
  r.heard('n1');
  r.tick(150);
  await until('a flush after the start', async () => ((await store.loadLastSeen()).flushes.get('e1') ?? 0) > T0);
  down.on = true;
  const lostAt = r.tick(50);
  r.observer.lost();
  r.tick(5_000);
  await r.observer.stop();
  down.on = false;

  const next = rig(store);
  next.clock.wall = r.clock.wall + 60_000;
  await next.observer.start();
  next.observer.consuming();
  const recorded = await until('the start recorded', async () => {
    const s = await next.spans();
    return s.length === 2 && s;
  });
  const spans = observedSpans(recorded);
  assert.equal(spans.length, 2);
  assert.ok(spans[0]!.to !== null && spans[0]!.to <= lostAt, `closed at ${spans[0]!.to}, the loss at ${lostAt}`);
  assert.equal(isObserved(spans, lostAt + 1_000), false);
  await next.observer.stop();
});

test('observedSince: the monotonic start of the open span, null while lost and after the stop (the rollout driver holds timeouts by it)', async () => {
  const r = rig();
  assert.equal(r.observer.observedSince(), null, 'before the start');
  r.tick(10);
  await r.observer.start();
  r.observer.consuming();
  assert.equal(r.observer.observedSince(), 10);
  r.tick(50);
  r.observer.lost();
  assert.equal(r.observer.observedSince(), null, 'while lost');
  r.tick(1_000);
  r.observer.consuming();
  assert.equal(r.observer.observedSince(), 1_060, 'from the resume');
  await r.observer.stop();
  assert.equal(r.observer.observedSince(), null, 'after the stop');
});
