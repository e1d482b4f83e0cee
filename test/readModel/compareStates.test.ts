import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { NodeState } from '../../projections/index.ts';
import { compareStates } from '../../src/readModel/replay.ts';
import { historyInStore } from '../support/history.ts';
import { replayStore } from '../../src/readModel/replay.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';

// compareStates answers "no difference" for equal values held in other objects (a snapshot's
// states against a replay's) without writing them out, and still finds every difference the
// canonical text shows.

async function folded(): Promise<Map<string, NodeState>> {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const a = await h.send('a', [{ id: 'web' }, { id: 'db' }]);
  h.tick();
  await h.report('a', { declared: a.digest, applied: ['web'], failed: { db: 'no disk' }, carried: [8080] });
  await h.alive('b');
  return replayStore(store);
}

const copy = <T>(v: T): T => structuredClone(v);

test('equal states in other objects are no difference', async () => {
  const expected = await folded();
  assert.deepEqual(compareStates(expected, [...expected.values()].map(copy)), []);
});

test('a value changed anywhere inside a field is a difference, named by its field', async () => {
  const expected = await folded();
  const a = expected.get('a')!;
  const cases: [string, NodeState][] = [
    ['reported', { ...copy(a), reported: { ...copy(a.reported!), failed: { db: 'no disk!' } } }],
    ['reported', { ...copy(a), reported: { ...copy(a.reported!), carried: [8081] } }],
    ['sent', { ...copy(a), sent: { ...copy(a.sent!), resourceIds: ['web'] } }],
    ['convergence', { ...copy(a), convergence: { ...copy(a.convergence), recentLatenciesMs: [1, 2] } }],
    ['position', { ...copy(a), position: a.position + 1n }],
  ];
  for (const [field, changed] of cases) {
    const diffs = compareStates(expected, [changed, copy(expected.get('b')!)]);
    assert.deepEqual(
      diffs.map((d) => [d.node, d.field]),
      [['a', field]],
    );
  }
});

test('same answer as comparing the canonical text, for any pair of plain values', () => {
  const value = fc.letrec((tie) => ({
    v: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom(null, 0, -0, 1, NaN, '', 'x', true, false, undefined, 1n, 2n),
      fc.array(tie('v'), { maxLength: 3 }),
      fc.dictionary(fc.constantFrom('a', 'b', 'c'), tie('v'), { maxKeys: 3 }),
    ),
  })).v;
  const canonical = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? 'undefined';
  fc.assert(
    fc.property(value, value, (x, y) => {
      const base = { node: 'n' } as unknown as NodeState;
      const diffs = compareStates(new Map([['n', { ...base, f: x } as unknown as NodeState]]), [{ ...base, f: y } as unknown as NodeState]);
      assert.equal(diffs.length === 0, canonical(x) === canonical(y));
    }),
    { numRuns: 2_000 },
  );
});
