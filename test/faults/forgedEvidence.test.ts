import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { parseAt } from '../../projections/index.ts';
import { parseEvidence } from '../../src/core/audit/evidenceFormat.ts';
import { checkEvidence } from '../../src/readModel/evidence/check.ts';
import { stateAsOf } from '../../src/readModel/queries.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { writeHistory } from '../support/auditHistory.ts';
import {
  at,
  checkWithAuditKey,
  createEvidenceLab,
  exportBundle,
  forgedEvidence,
  forgeryCases,
  node,
  nodes,
  rounds,
} from './forgedEvidenceScenario.ts';

// Evidence bundles exported from a real SQLite store with signed checkpoints, checked offline
// (forgedEvidenceScenario.ts): the honest one verifies and states what `converge state --at`
// answers; each forgery is found by kind and position.

const lab = await createEvidenceLab();
after(() => lab.remove());

test('export then check: the honest bundle verifies with the audit key, and its answer is state --at', async () => {
  const text = JSON.stringify(lab.bundle);
  const parsed = parseEvidence(text);
  assert.ok(typeof parsed !== 'string', String(parsed));
  const r = checkEvidence(parsed, { auditKey: lab.audit.publicKey, declarationKey: null, allowUnsigned: false });
  assert.equal(r.finding, null, r.finding?.message);
  assert.deepEqual(r.keyUsed, { keyId: lab.bundle.checkpoint!.checkpoint.keyId, source: 'given' });
  assert.equal(r.events.node, 6, 'rounds 0 and 1: a send, a report and an alive each');
  assert.equal(r.events.observation, 1);
  // The covering checkpoint is the second (it signed rounds 0 and 1), the consistency proof reaches the last.
  assert.equal(lab.bundle.tree.size, 1 + 2 * nodes * 3 + 1);
  assert.equal(lab.bundle.latest!.checkpoint.size, 1 + rounds * nodes * 3 + rounds - 1);
  assert.ok(lab.bundle.consistency!.path.length > 0);
  const store = createSqliteEventStore(lab.storePath);
  try {
    const s = (await stateAsOf(store, node, parseAt(at)!, 60_000)).state;
    assert.deepEqual(r.answer, {
      status: s.status,
      caughtUp: s.caughtUp,
      sentDigest: s.sent?.digest ?? null,
      sentSerial: s.sent?.serial ?? null,
      reportedDigest: s.reported?.declared ?? null,
      liveness: { state: s.liveness.state, lastSeenAt: s.liveness.lastSeenAt },
      folded: 6,
      position: s.position,
    });
    assert.equal(s.sent?.serial, 2, 'as of round 1, the second send');
  } finally {
    await store.close();
  }
});

test("without --audit-pub the bundle's own key is used, and named as such", () => {
  const r = checkEvidence(lab.bundle, { auditKey: null, declarationKey: null, allowUnsigned: false });
  assert.equal(r.finding, null);
  assert.equal(r.keyUsed?.source, 'bundle');
  const keyless = { ...lab.bundle, keys: { audit: null, declaration: null } };
  assert.equal(checkEvidence(keyless, { auditKey: null, declarationKey: null, allowUnsigned: false }).finding?.kind, 'nokey');
});

for (const c of forgeryCases) {
  test(`${c.name}: found by kind and position`, () => {
    const found = checkWithAuditKey(lab, c.forge(lab));
    assert.deepEqual([found.kind, found.position], c.expect(lab), found.message);
  });
}

test('the other kinds: consistency, tree, a leaf index moved, an event of another stream', () => {
  const forge = (change: (b: typeof lab.bundle) => void): [string | null, string | null] => {
    const b = structuredClone(lab.bundle);
    change(b);
    const found = checkWithAuditKey(lab, b);
    return [found.kind, found.position];
  };
  const flip = (h: string): string => (h[0] === '0' ? '1' : '0') + h.slice(1);
  assert.deepEqual(
    forge((b) => (b.consistency!.path[0] = flip(b.consistency!.path[0]!))),
    ['consistency', lab.bundle.latest!.position],
  );
  assert.deepEqual(
    forge((b) => (b.tree = { ...b.tree, size: b.tree.size + 1 })),
    ['tree', lab.bundle.checkpoint!.position],
  );
  const last = lab.bundle.events.at(-1)!;
  assert.deepEqual(
    forge((b) => (b.events.at(-1)!.leafIndex += 1)),
    ['inclusion', last.position],
  );
  assert.deepEqual(
    forge((b) => (b.events.at(-1)!.stream = 'node-web-004')),
    ['stream', last.position],
  );
});

test('no checkpoint covers the moment: refused, unless unsigned; an unsigned bundle is checked but not accepted by default', async () => {
  const store = createSqliteEventStore(lab.storePath);
  try {
    await writeHistory(store, nodes, rounds); // after the last checkpoint
    const later = `2026-01-01T00:0${rounds}:00.000Z`;
    await assert.rejects(exportBundle(store, lab.audit.publicKey, later), { code: 'CONVERGE_ERR_EVIDENCE_UNSIGNED' });
    const b = await exportBundle(store, lab.audit.publicKey, later, true);
    assert.equal(b.signed, false);
    assert.equal(b.checkpoint, null);
    assert.equal(b.tree.size, Number((await store.auditHead()).size));
    const strict = checkEvidence(b, { auditKey: lab.audit.publicKey, declarationKey: null, allowUnsigned: false });
    assert.equal(strict.finding?.kind, 'unsigned');
    assert.equal(checkEvidence(b, { auditKey: lab.audit.publicKey, declarationKey: null, allowUnsigned: true }).finding, null);
  } finally {
    await store.close();
  }
});

test('the RELIABILITY.md scenario holds every check', async () => {
  const r = await forgedEvidence.run(undefined as never);
  assert.equal(r.hostileAppended, 0, JSON.stringify(r.checks));
  assert.ok(Object.values(r.checks).every(Boolean), JSON.stringify(r.checks));
});
