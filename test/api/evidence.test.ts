import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { parseEvidence } from '../../src/core/audit/evidenceFormat.ts';
import { createAuditCheckpoints } from '../../src/engine/auditCheckpoints.ts';
import { checkEvidence } from '../../src/readModel/evidence/check.ts';
import { apiHarness, read } from '../support/apiHarness.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';

// GET /v1/nodes/:node/evidence through buildApp (docs/api.md#evidence-bundles): the bundle the
// CLI exports, with the engine's public keys in it, checked offline; 409 when no checkpoint
// covers the moment, unless unsigned=true; a read token; the moment validated.

const audit = generateKeyPairSync('ed25519');

test('the evidence bundle verifies offline, states what GET …/state answers, and names the engine keys', async (t) => {
  const h = await apiHarness({ auditKey: audit.privateKey, declarationKey: testKey.publicKey });
  t.after(() => h.close());
  const cp = createAuditCheckpoints({
    store: h.store,
    key: audit.privateKey,
    logger,
    everyEvents: 1,
    everyMs: 3_600_000,
    pollMs: 3_600_000,
  });
  const a = await h.history.send('o1');
  h.history.tick();
  await h.history.report('o1', { declared: a.digest, applied: ['web'] });
  const at = h.history.tick().toISOString();
  await h.history.send('o2');
  await cp.checkpoint();
  h.history.tick();
  await h.history.send('o1'); // after the moment, and after the checkpoint
  await h.settle();

  const r = await h.app.inject({ url: `/v1/nodes/o1/evidence?at=${encodeURIComponent(at)}`, headers: read });
  assert.equal(r.statusCode, 200, r.body);
  assert.match(String(r.headers['content-disposition']), /^attachment; filename="evidence-o1-/);
  const bundle = parseEvidence(r.body);
  assert.ok(typeof bundle !== 'string', String(bundle));
  assert.equal(bundle.signed, true);
  assert.equal(bundle.events.length, 2, 'the send and the report up to the moment; not the later send');
  const checked = checkEvidence(bundle, { auditKey: audit.publicKey, declarationKey: null, allowUnsigned: false });
  assert.equal(checked.finding, null, checked.finding?.message);
  assert.equal(checked.declarations.checked, 1, "the send's signature, with the engine's declaration key carried in the bundle");
  const state = (await h.app.inject({ url: `/v1/nodes/o1/state?at=${encodeURIComponent(at)}`, headers: read })).json();
  assert.equal(checked.answer?.status, state.state.status);
  assert.equal(checked.answer?.sentDigest, state.state.sent.digest);
  assert.equal(checked.answer?.reportedDigest, state.state.reported.declared);
  assert.equal(checked.answer?.liveness.state, state.state.liveness.state);

  const later = h.history.now().toISOString();
  const refused = await h.app.inject({ url: `/v1/nodes/o1/evidence?at=${encodeURIComponent(later)}`, headers: read });
  assert.equal(refused.statusCode, 409);
  assert.equal(refused.json().code, 'CONVERGE_ERR_EVIDENCE_UNSIGNED');
  const unsigned = await h.app.inject({ url: `/v1/nodes/o1/evidence?at=${encodeURIComponent(later)}&unsigned=true`, headers: read });
  assert.equal(unsigned.statusCode, 200);
  assert.equal(unsigned.json().signed, false);
  assert.equal(unsigned.json().events.length, 3);

  const ranged = await h.app.inject({ url: `/v1/nodes/o1/evidence?from=1&to=${encodeURIComponent(at)}`, headers: read });
  assert.equal(ranged.statusCode, 200);
  assert.equal(ranged.json().from, '1');
});

test('evidence needs a read token, a moment, and a node that exists', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  await h.history.send('o1');
  assert.equal((await h.app.inject({ url: '/v1/nodes/o1/evidence?at=5' })).statusCode, 401);
  assert.equal((await h.app.inject({ url: '/v1/nodes/o1/evidence', headers: read })).statusCode, 400);
  assert.equal((await h.app.inject({ url: '/v1/nodes/o1/evidence?at=yesterday', headers: read })).statusCode, 400);
  assert.equal((await h.app.inject({ url: '/v1/nodes/nope/evidence?at=5', headers: read })).statusCode, 404);
  const doc = (await h.app.inject({ url: '/v1/openapi.json' })).json();
  assert.ok(doc.paths['/v1/nodes/{node}/evidence']?.get, 'documented in the OpenAPI document');
  assert.ok(doc.components.schemas.EvidenceBundle, 'the bundle is a named schema');
});
