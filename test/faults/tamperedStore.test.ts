import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { faultSeed } from './scenarios.ts';
import { applyRandomTamper, createTamperLab, expectedKind, randomTamperArb, tamperCases, tamperedStore } from './tamperedStoreScenario.ts';
import type { TamperKind } from '../../src/core/audit/verifyLog.ts';

// The insider's one SQL statement against a SQLite store (tamperedStoreScenario.ts): each found,
// at the first position it touched and by kind. No broker: the store alone.

const lab = await createTamperLab();
after(() => lab.remove());

test('the untouched store verifies intact', async () => {
  assert.deepEqual(await lab.tampered(() => {}), { kind: null, position: null, message: '' });
});

for (const c of tamperCases(lab.total)) {
  test(`${c.name}: found at the first position touched, by kind`, async () => {
    const found = await lab.tampered(c.change);
    let want: [TamperKind, bigint] | null = null;
    await lab.tampered((db) => void (want = c.expect(lab, db)));
    assert.deepEqual([found.kind, found.position], want, found.message);
  });
}

test('a swap names the position the moved event was written at', async () => {
  const swap = tamperCases(lab.total).find((c) => c.name === 'two events swapped')!;
  assert.match((await lab.tampered(swap.change)).message, /written at 11/);
});

test('a head rewritten to match nothing is found as the head', async () => {
  assert.equal((await lab.tampered((db) => db.exec('UPDATE audit_head SET root = zeroblob(32)'))).kind, 'head');
});

test('property: any one byte changed in any stored event, or any event deleted, is found at that position', async () => {
  await fc.assert(
    fc.asyncProperty(randomTamperArb(lab.total), async (t) => {
      const found = await lab.tampered(applyRandomTamper(t));
      assert.deepEqual([found.kind, found.position], [expectedKind(t, lab.total), t.position], found.message);
    }),
    { numRuns: 60, seed: faultSeed('tampered store property') },
  );
});

test('the RELIABILITY.md scenario holds every check', async () => {
  const r = await tamperedStore.run(undefined as never);
  assert.equal(r.hostileAppended, 0, JSON.stringify(r.checks));
  assert.ok(Object.values(r.checks).every(Boolean), JSON.stringify(r.checks));
});
