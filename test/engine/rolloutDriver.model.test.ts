import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { allowance, meterOf, planBudget, planWaves } from '../../src/core/rollout/index.ts';
import type { StartRolloutInput } from '../../src/engine/rolloutCommands.ts';
import { holdsStream, makeDeclarationSent, makeHoldEvent, streamOf } from '../../src/core/events/index.ts';
import { testKey } from '../support/history.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import type { NodeBehaviour } from '../support/rolloutFleet.ts';

// A model-based test of the driver. fast-check draws a fleet (each node applies,
// refuses, fails a resource, stays silent, or only ever reports about the declaration it had
// before — the seed's race), a wave plan and a failure budget; the driver runs the rollout over a
// store, a live read model and that fleet until it ends, the clock moved past a wave's timeout
// only when nothing else can happen. A model of waves and budgets, written here without the
// projections' decision, says how it must end: which waves complete with which counts, where it
// halts, and that every node up to there got exactly one declaration from it and none after.
// A drawn rollbackOnHalt then rolls a halted one back: the model says which nodes are sent their
// previous spec (those sent ours, in scope, that had one), and which of them report it.
// Some nodes are held or pinned before the start (docs/design.md §8 "Holds and pins"): the model
// takes them out of their waves — never sent, never rolled back, counted in no budget — and a wave
// left with none of its nodes completes with nothing done.

type Plan = Readonly<{
  behaviours: readonly NodeBehaviour[];
  /** Whether each node had been sent a declaration before the rollout (a stale node always had). */
  previous: readonly boolean[];
  waves: string;
  maxFailures: string;
  rollbackOnHalt: 'none' | 'wave' | 'all';
  /** An operator's hold or pin on each node, recorded before the rollout starts. */
  marks: readonly Mark[];
  /** Metered sends (docs/design.md §8 "Rate"), or none: the outcome is the same, only slower. */
  meter: Pick<StartRolloutInput, 'rate' | 'ramp'>;
}>;
type Mark = 'none' | 'held' | 'pinned';

const behaviour = fc.constantFrom<NodeBehaviour>('apply', 'apply', 'apply', 'refuse', 'degrade', 'silent', 'stale');
const step = fc.oneof(
  fc.integer({ min: 1, max: 6 }).map(String),
  fc.integer({ min: 1, max: 100 }).map((p) => `${p}%`),
);
const plan: fc.Arbitrary<Plan> = fc.record({
  behaviours: fc.array(behaviour, { minLength: 1, maxLength: 10 }),
  previous: fc.array(fc.boolean(), { minLength: 10, maxLength: 10 }),
  rollbackOnHalt: fc.constantFrom('none', 'wave', 'all'),
  marks: fc.array(fc.constantFrom<Mark>('none', 'none', 'none', 'held', 'pinned'), { minLength: 10, maxLength: 10 }),
  meter: fc.constantFrom<Pick<StartRolloutInput, 'rate' | 'ramp'>>(
    {},
    {},
    { rate: { perMinute: 6 } },
    { rate: { perMinute: 90 } },
    { ramp: { base: 6, factor: 2, cap: 30, everyMs: 20_000 } },
  ),
  waves: fc.array(step, { minLength: 1, maxLength: 4 }).map((xs) => xs.join(',')),
  maxFailures: fc.oneof(
    fc.integer({ min: 0, max: 3 }).map(String),
    fc.integer({ min: 0, max: 60 }).map((p) => `${p}%`),
  ),
});

type Expected =
  | Readonly<{ status: 'completed'; waves: readonly (readonly [done: number, failed: number])[] }>
  | Readonly<{ status: 'halted'; waves: readonly (readonly [number, number])[]; wave: number; atLeast: number; atMost: number }>;

/**
 * The model: waves in order; a wave's failures are its nodes that do not apply (the silent and
 * the stale ones by timeout), and a wave completes only with at least one node done.
 */
function model(p: Plan): Expected {
  const n = p.behaviours.length;
  const cumulative = (planWaves(p.waves, n) as { cumulative: readonly number[] }).cumulative;
  const budget = planBudget(p.maxFailures, n) as number;
  const done: (readonly [number, number])[] = [];
  let failed = 0;
  let from = 0;
  for (const [i, to] of cumulative.entries()) {
    const wave = p.behaviours.slice(from, to).filter((_, j) => (p.marks[from + j] ?? 'none') === 'none');
    if (wave.length === 0) {
      // Every node of the wave held or pinned: nothing sent, nothing settled, nothing spent.
      done.push([0, 0]);
      from = to;
      continue;
    }
    const answered = wave.filter((b) => b === 'refuse' || b === 'degrade').length;
    const late = wave.filter((b) => b === 'silent' || b === 'stale').length;
    // Failures that answer halt the rollout as soon as they exceed the budget, maybe before all of them answered.
    if (failed + answered > budget) return { status: 'halted', waves: done, wave: i + 1, atLeast: budget + 1, atMost: failed + answered };
    if (failed + answered + late > budget) {
      return { status: 'halted', waves: done, wave: i + 1, atLeast: failed + answered + late, atMost: failed + answered + late };
    }
    // A wave settled with no node done proves nothing: the rollout halts there, whatever the budget left.
    if (wave.length - answered - late === 0) {
      return { status: 'halted', waves: done, wave: i + 1, atLeast: failed + answered + late, atMost: failed + answered + late };
    }
    failed += answered + late;
    done.push([wave.length - answered - late, answered + late]);
    from = to;
  }
  return { status: 'completed', waves: done };
}

test('model: the driver ends every drawn rollout as the model of waves and budgets says', async () => {
  await fc.assert(
    fc.asyncProperty(plan, async (p) => {
      const nodes = p.behaviours.map((_, i) => `m${i}`);
      const f = await rolloutFleet({ behaviour: Object.fromEntries(nodes.map((n, i) => [n, p.behaviours[i]!])) });
      try {
        // The stale nodes were sent a declaration before the rollout, which they will go on reporting;
        // others may have been, which a rollback restores.
        const hadPrevious = (i: number): boolean => p.behaviours[i] === 'stale' || p.previous[i] === true;
        for (const [i, node] of nodes.entries()) {
          if (!hadPrevious(i)) continue;
          const e = makeDeclarationSent({ node, serial: 1, resources: [{ id: 'old' }], key: testKey, now: f.now() });
          await f.store.append([{ stream: streamOf(node), expected: 'no_stream', events: [e] }]);
        }
        const marked = (i: number): boolean => (p.marks[i] ?? 'none') !== 'none';
        for (const [i, node] of nodes.entries()) {
          const mark = p.marks[i] ?? 'none';
          if (mark === 'none') continue;
          const h = (await f.store.readStream(holdsStream)).length;
          const data = { node, by: 'test', reason: 'model', at: f.now().toISOString() };
          const e = makeHoldEvent(mark === 'held' ? 'NodeHeld' : 'NodePinned', data, h === 0 ? null : BigInt(h - 1));
          await f.store.append([{ stream: holdsStream, expected: 'any', events: [e] }]);
        }
        const id = await f.start({
          rollout: 'model',
          selection: { kind: 'nodes', nodes },
          waves: p.waves,
          maxFailures: p.maxFailures,
          waveTimeoutMs: 10_000,
          rollbackOnHalt: p.rollbackOnHalt,
          ...p.meter,
        });
        let s = await f.rollout(id);
        let idle = 0;
        const moving = (): boolean =>
          s.status === 'running' || s.status === 'rollingBack' || (s.status === 'halted' && p.rollbackOnHalt !== 'none');
        for (let i = 0; i < 300 && moving(); i++) {
          const before = s.revision;
          await f.settle();
          s = await f.rollout(id);
          // Nothing moved in a whole settle: only a timeout can move it now.
          if (s.revision === before && ++idle >= 2) {
            f.tick(10_001);
            idle = 0;
          }
        }
        // Metered: by each RolloutSent, no more nodes reached than the meter allowed since wave 1 opened.
        const meter = meterOf((await f.rollout(id)).started);
        if (meter !== null) {
          const events = await f.events(id);
          const t0 = events.find((e) => e.type === 'WaveStarted')?.data as { startedAt: string } | undefined;
          let reached = 0;
          for (const e of events) {
            if (e.type !== 'RolloutSent') continue;
            reached += e.data.sends.length + e.data.skipped.length;
            const allowed = allowance(meter, Date.parse(e.data.sentAt) - Date.parse(t0!.startedAt));
            assert.ok(reached <= allowed, `${reached} nodes reached by ${e.data.sentAt}, the meter allowed ${allowed}`);
          }
        }
        const expected = model(p);
        const rolledBack = expected.status === 'halted' && p.rollbackOnHalt !== 'none';
        assert.equal(s.status, rolledBack ? 'rolledBack' : expected.status);
        const completed = s.waves.filter((w) => w.completed !== null).map((w) => [w.completed!.done, w.completed!.failed] as const);
        assert.deepEqual(completed, expected.waves);
        let lastWave = s.waves.length;
        if (expected.status === 'halted') {
          assert.equal(s.halted?.wave, expected.wave);
          assert.ok(
            s.halted.failures >= expected.atLeast && s.halted.failures <= expected.atMost,
            `halted with ${s.halted.failures} failures`,
          );
          lastWave = expected.wave;
        } else {
          assert.deepEqual(
            [s.completed?.done, s.completed?.failed],
            [expected.waves.reduce((a, w) => a + w[0], 0), expected.waves.reduce((a, w) => a + w[1], 0)],
          );
        }
        const reached = s.waves[lastWave - 1]!.to;
        // Metered, a halted wave may halt before all its nodes were sent to: the criteria apply
        // between metered batches too. Every node of an earlier wave was sent to, once.
        const haltedFrom = expected.status === 'halted' && meter !== null ? s.waves[lastWave - 1]!.from : reached;
        const sent = new Set(s.sends.keys());
        const inScope = (i: number): boolean =>
          rolledBack && sent.has(nodes[i]!) && (p.rollbackOnHalt === 'all' || i >= s.waves[lastWave - 1]!.from);
        let restored = 0;
        for (const [i, node] of nodes.entries()) {
          const tagged = (await f.sentTo(node)).filter((e) => e.data.rollout?.id === id);
          const ours = tagged.filter((e) => e.data.rollout?.rollback !== true);
          const back = tagged.filter((e) => e.data.rollout?.rollback === true);
          if (i < haltedFrom || i >= reached || marked(i))
            assert.equal(ours.length, i < reached && !marked(i) ? 1 : 0, `${node} (target ${i}, waves reach ${reached})`);
          else assert.ok(ours.length <= 1, `${node}: sent to at most once (metered, halted wave)`);
          assert.equal(sent.has(node), ours.length === 1, `${node}: the rollout lists what it sent`);
          // A held or pinned node its waves reached is listed as skipped, with its own code.
          if (marked(i) && i < haltedFrom) assert.equal(s.skipped.get(node)?.code, p.marks[i], `${node}: skipped as ${p.marks[i]}`);
          // Sent its previous spec back exactly when it was sent ours, is in scope, and had one.
          assert.equal(back.length, inScope(i) && hadPrevious(i) ? 1 : 0, `${node}: rolled back`);
          if (back.length === 1) {
            assert.equal(back[0]!.data.specDigest, (await f.sentTo(node))[0]!.data.specDigest, `${node}: its previous spec`);
            if (p.behaviours[i] === 'apply') restored++;
          }
        }
        if (rolledBack) {
          const done = s.rollback?.completed;
          const skipped = nodes.filter((_, i) => inScope(i) && !hadPrevious(i)).length;
          // Only the nodes that apply report their restored spec converged; the others fail it.
          assert.deepEqual([done?.done, done?.skipped], [restored, skipped]);
          assert.equal(done?.failed, nodes.filter((_, i) => inScope(i) && hadPrevious(i)).length - restored);
        }
      } finally {
        await f.stop();
      }
    }),
    { numRuns: Number(process.env['CONVERGE_MODEL_RUNS'] ?? 60), seed: Number(process.env['CONVERGE_MODEL_SEED'] ?? 1_411) },
  );
});
