import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { foldNodeEvents, foldVersion } from '../../projections/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { history } from '../support/history.ts';

// Snapshots are restored only by a fold of the same foldVersion (projections/foldVersion.ts).
// This folds a fixed corpus that reaches every branch of the fold — every status, every report
// class, a duplicate delivery, A·B·A, a superseded send, carried ports, alive — and compares a
// hash of the result with the one recorded for the current foldVersion in
// test/fixtures/foldGolden.json. A fold change that alters any result must bump foldVersion (or a
// stale snapshot would be served as if this fold had made it); `UPDATE_FOLD_GOLDEN=1` records the
// hash of a new version. Hashes of earlier versions stay in the file, so a number is never reused.

const goldenPath = new URL('../fixtures/foldGolden.json', import.meta.url);

function corpus(): Map<string, Recorded[]> {
  const nodes = new Map<string, Recorded[]>();
  const add = (node: string, script: (h: ReturnType<typeof history>) => void): void => {
    const h = history(node);
    script(h);
    nodes.set(node, h.events);
  };
  add('converged', (h) => {
    h.alive();
    const a = h.send([{ id: 'web', ports: [8081] }, { id: 'db' }]);
    h.tick(1500);
    h.report({ declared: a.data.digest, applied: ['web', 'db'], carried: [22] });
    h.tick();
    h.alive();
  });
  add('race', (h) => {
    const a = h.send();
    h.tick();
    const b = h.send([{ id: 'web' }, { id: 'cache' }]);
    h.tick();
    h.report({ declared: a.data.digest, applied: ['web'] }); // stale: the seed's race
    h.tick(2500);
    h.report({ declared: b.data.digest, applied: ['web', 'cache'] });
  });
  add('degraded', (h) => {
    const a = h.send([{ id: 'web' }, { id: 'db' }, { id: 'queue' }]);
    h.tick();
    h.report({ declared: a.data.digest, applied: ['web'], failed: { db: 'disk full', __proto__: 'odd name' } });
  });
  add('refused', (h) => {
    const a = h.send();
    h.tick();
    h.report({ declared: a.data.digest, refused: 'signature key unknown' });
  });
  add('anomalies', (h) => {
    h.report({ declared: null, applied: ['legacy'] }); // before any send, legacy
    h.send();
    h.tick();
    h.report({ declared: 'f'.repeat(64) }); // unknown digest
    h.report({ declared: null }); // undeclared
  });
  add('aba', (h) => {
    const a1 = h.send([{ id: 'a' }]);
    h.tick();
    h.report({ declared: a1.data.digest, applied: ['a'] });
    h.send([{ id: 'b' }]); // superseded: never reported
    h.tick();
    const a2 = h.send([{ id: 'a' }]);
    h.tick();
    const dup = h.report({ declared: a2.data.digest, applied: ['a'] });
    h.events.push({ ...dup, revision: dup.revision + 1n, position: dup.position + 5n }); // the same report delivered twice
  });
  add('forgotten', (h) => {
    // Nine sends: the first falls out of the kept history (sendHistoryLimit), the second is still in it.
    const sends = Array.from({ length: 9 }, (_, i) => h.send([{ id: `r${i}` }]));
    h.tick();
    h.report({ declared: sends[1]!.data.digest, applied: ['r1'] }); // stale, seven sends late
    h.report({ declared: sends[0]!.data.digest, applied: ['r0'] }); // beyond the window: unknown
  });
  add('silent', (h) => {
    h.alive();
    h.tick(120_000);
  });
  return nodes;
}

/** Stable text of fold results: bigint as decimal, Map entries in order, keys as they are. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x instanceof Map ? [...(x as Map<unknown, unknown>)] : x));

test('the fold of the fixed corpus is the one recorded for this foldVersion (else: bump foldVersion)', () => {
  const states = [...corpus()].map(([node, events]) => foldNodeEvents(node, events));
  const hash = createHash('sha256').update(canonical(states)).digest('hex');
  const golden = JSON.parse(readFileSync(goldenPath, 'utf8')) as Record<string, string>;
  const recorded = golden[String(foldVersion)];
  if (process.env['UPDATE_FOLD_GOLDEN'] === '1' && recorded === undefined) {
    writeFileSync(goldenPath, `${JSON.stringify({ ...golden, [String(foldVersion)]: hash }, null, 2)}\n`);
    return;
  }
  assert.ok(
    recorded !== undefined,
    `no fold result is recorded for foldVersion ${foldVersion}: run UPDATE_FOLD_GOLDEN=1 npm run test:only -- foldVersion, and commit test/fixtures/foldGolden.json`,
  );
  assert.equal(
    hash,
    recorded,
    `the fold's result changed but foldVersion is still ${foldVersion}: bump foldVersion in projections/foldVersion.ts (a snapshot made by the old fold must not be restored), then record the new result with UPDATE_FOLD_GOLDEN=1`,
  );
});

test('the corpus reaches every status and every report class', () => {
  const states = [...corpus()].map(([node, events]) => foldNodeEvents(node, events));
  assert.deepEqual(new Set(states.map((s) => s.status)), new Set(['converged', 'degraded', 'refused', 'behind', 'undeclared']));
  const classes = new Set(states.flatMap((s) => (s.reported === null ? [] : [s.reported.class])));
  const byNode = new Map(states.map((s) => [s.node, s]));
  assert.ok(classes.has('matching'));
  assert.equal(byNode.get('race')?.anomalies.stale, 1);
  assert.equal(byNode.get('anomalies')?.anomalies.unknown, 1);
  assert.ok((byNode.get('anomalies')?.anomalies.undeclared ?? 0) >= 1);
  assert.equal(byNode.get('aba')?.convergence.superseded, 1);
  assert.deepEqual(byNode.get('forgotten')?.anomalies, { stale: 1, unknown: 1, undeclared: 0 });
});
