import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { conditionReasons } from '../../projections/index.ts';
import { apiHarness, read } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';

// The node state answers carry conditions (docs/api.md#conditions): the same words in one node's
// answer, the list, the state as of a moment, and the OpenAPI document's enum of reasons.

type Condition = { type: string; status: string; reason: string; message: string; lastTransitionTime: string | null };
const byType = (body: { conditions: Condition[] }): Record<string, Condition> =>
  Object.fromEntries(body.conditions.map((c) => [c.type, c]));

describe('conditions in the node routes', () => {
  let h: ApiHarness;
  let staleAt: string;
  let sentAt2: string;
  before(async () => {
    h = await apiHarness();
    const a = await h.history.send('n1');
    h.history.tick(200);
    await h.history.send('n1', [{ id: 'web' }, { id: 'db' }]);
    sentAt2 = h.history.now().toISOString();
    h.history.tick(300);
    await h.history.report('n1', { declared: a.digest, applied: ['web'] });
    staleAt = h.history.now().toISOString();
    const b = await h.history.send('n2');
    h.history.tick();
    await h.history.report('n2', { declared: b.digest, applied: ['web'] });
    await h.settle();
  });
  after(() => h.close());

  test('GET /v1/nodes/:node: a stale report is Converged=False StaleReport, as of the report', async () => {
    const r = await h.app.inject({ url: '/v1/nodes/n1', headers: read });
    assert.equal(r.statusCode, 200);
    const c = byType(r.json());
    assert.deepEqual(c.Converged, {
      type: 'Converged',
      status: 'False',
      reason: 'StaleReport',
      message: `reported serial 1 at ${staleAt}, sent serial 2 at ${sentAt2}`,
      lastTransitionTime: staleAt,
    });
    assert.equal(c.CaughtUp!.reason, 'StaleReport');
    assert.deepEqual([c.Connected!.status, c.Connected!.reason, c.Connected!.lastTransitionTime], ['True', 'Heard', staleAt]);
  });

  test('GET /v1/nodes and the state as of a moment carry the same conditions', async () => {
    const list = (await h.app.inject({ url: '/v1/nodes', headers: read })).json();
    const n2 = list.nodes.find((n: { node: string }) => n.node === 'n2');
    assert.deepEqual(
      n2.conditions.map((c: Condition) => `${c.type}=${c.status}:${c.reason}`),
      ['Converged=True:Converged', 'CaughtUp=True:Acknowledged', 'Connected=True:Heard'],
    );
    const at = (await h.app.inject({ url: `/v1/nodes/n1/state?at=${encodeURIComponent(sentAt2)}`, headers: read })).json();
    assert.equal(byType(at.state).Converged!.reason, 'NotReported');
    assert.equal(byType(at.state).Converged!.lastTransitionTime, sentAt2);
  });

  test('the OpenAPI document lists the conditions and their closed list of reasons', async () => {
    const doc = (await h.app.inject({ url: '/v1/openapi.json' })).json();
    const schemas = doc.components.schemas;
    assert.deepEqual(schemas.Condition.properties.reason.enum, [...conditionReasons]);
    assert.deepEqual(schemas.Condition.properties.status.enum, ['True', 'False', 'Unknown']);
    assert.ok(schemas.NodeState.required.includes('conditions'));
  });
});
