import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { makeNodeHeard, makeNodeSilent } from '../../src/core/events/index.ts';
import { createLivenessRecorder } from '../../src/engine/liveness/recorder.ts';
import { createDueQueue } from '../../src/engine/liveness/dueQueue.ts';

// The recorder's sweep looks only at the top of a queue by time heard; the definition is a scan
// of every node (the model below). Under random sightings, seeds, shared-lease answers and sweeps
// cut short, both make the same events and answer the same "is anything due".

type ModelEntry = { seenMs: number; seenMono: number; state: 'heard' | 'known' | 'silent' };

function model(graceMs: number) {
  const nodes = new Map<string, ModelEntry>();
  return {
    heard(node: string, atMs: number, mono: number) {
      const e = nodes.get(node);
      if (e === undefined) {
        nodes.set(node, { seenMs: atMs, seenMono: mono, state: 'heard' });
        return makeNodeHeard(node, atMs, null);
      }
      const before = e.seenMs;
      if (atMs > e.seenMs) e.seenMs = atMs;
      if (mono > e.seenMono) e.seenMono = mono;
      if (e.state === 'heard') return null;
      e.state = 'heard';
      return makeNodeHeard(node, atMs, before);
    },
    dueCount(mono: number) {
      let n = 0;
      for (const e of nodes.values()) if (e.state !== 'silent' && mono - e.seenMono >= graceMs) n++;
      return n;
    },
    silences(mono: number, wallMs: number, shared?: (node: string) => number | undefined) {
      const out = [];
      for (const [node, e] of nodes) {
        if (e.state === 'silent' || mono - e.seenMono < graceMs) continue;
        const s = shared?.(node);
        if (s !== undefined && s > e.seenMs) {
          const ago = Math.max(0, wallMs - s);
          e.seenMs = s;
          e.seenMono = mono - ago;
          if (ago < graceMs) continue;
        }
        e.state = 'silent';
        out.push(makeNodeSilent(node, e.seenMs, wallMs, graceMs));
      }
      return out;
    },
    seed(known: ReadonlyMap<string, number>, mono: number) {
      for (const [node, ms] of known) if (!nodes.has(node)) nodes.set(node, { seenMs: ms, seenMono: mono, state: 'known' });
    },
    all: () => new Map([...nodes].map(([n, e]) => [n, e.seenMs])),
  };
}

const node = fc.constantFrom(...Array.from({ length: 12 }, (_, i) => `n-${i}`));
const op = fc.oneof(
  fc.record({ kind: fc.constant('heard' as const), node, step: fc.integer({ min: -20, max: 80 }) }),
  fc.record({ kind: fc.constant('tick' as const), step: fc.integer({ min: 0, max: 200 }) }),
  fc.record({ kind: fc.constant('seed' as const), nodes: fc.uniqueArray(node, { maxLength: 5 }) }),
  fc.record({ kind: fc.constant('due' as const) }),
  fc.record({
    kind: fc.constant('sweep' as const),
    cut: fc.integer({ min: 0, max: 4 }),
    shared: fc.option(fc.dictionary(node, fc.integer({ min: -150, max: 50 })), { nil: undefined }),
  }),
);

test('the queued sweep makes the events and the answers of a scan of every node', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 150 }), fc.array(op, { maxLength: 80 }), (graceMs, ops) => {
      const fast = createLivenessRecorder({ graceMs });
      const slow = model(graceMs);
      let mono = 1_000;
      let wall = 5_000_000;
      for (const o of ops) {
        if (o.kind === 'tick') {
          mono += o.step;
          wall += o.step;
        } else if (o.kind === 'heard') {
          // A sighting's own times may lag the clock a little (parsed a moment before it is recorded).
          const m = mono + Math.min(0, o.step);
          const w = wall + o.step;
          assert.deepEqual(fast.heard(o.node, w, m), slow.heard(o.node, w, m));
        } else if (o.kind === 'seed') {
          const known = new Map(o.nodes.map((n, i) => [n, wall - 100 * i]));
          fast.seed(known, mono);
          slow.seed(known, mono);
        } else if (o.kind === 'due') {
          assert.equal(fast.due(mono), slow.dueCount(mono) > 0);
        } else {
          const table = o.shared;
          const shared = table === undefined ? undefined : (n: string) => (table[n] === undefined ? undefined : wall + table[n]!);
          const expected = slow.silences(mono, wall, shared);
          // Cut short after `cut` nodes silenced: the calls after it answer the rest, each node once.
          const got = [];
          for (;;) {
            let made = 0;
            const events = fast.silences(mono, wall, shared, o.cut === 0 ? undefined : () => ++made >= o.cut);
            got.push(...events);
            if (o.cut === 0 || events.length < o.cut) break;
          }
          const byNode = (a: { data: { node: string } }, b: { data: { node: string } }) => a.data.node.localeCompare(b.data.node);
          assert.deepEqual(got.sort(byNode), expected.sort(byNode));
          assert.equal(fast.due(mono), false);
        }
        assert.deepEqual(fast.all(), slow.all());
      }
    }),
    { numRuns: 500 },
  );
});

test('the due queue gives its entries back by time, the first pushed of equal times first', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 60 }),
      fc.array(fc.integer({ min: 0, max: 30 }), { maxLength: 20 }),
      (ats, later) => {
        const q = createDueQueue<number>();
        const entries: { at: number; i: number }[] = [];
        ats.forEach((at, i) => {
          q.push(at, i);
          entries.push({ at, i });
        });
        // Retime the top to a later time: it sorts after every entry already at that time.
        for (const d of later) {
          const top = q.peek();
          if (top === undefined) break;
          const entry = entries.find((e) => e.i === top.item)!;
          entries.splice(entries.indexOf(entry), 1);
          entries.push({ at: top.at + d, i: top.item });
          q.retime(top.at + d);
        }
        // A stable sort by time keeps the order pushed (or retimed) among equals.
        const expected = [...entries].sort((a, b) => a.at - b.at).map((e) => e.i);
        const got: number[] = [];
        for (let top = q.pop(); top !== undefined; top = q.pop()) got.push(top.item);
        assert.deepEqual(got, expected);
      },
    ),
  );
});
