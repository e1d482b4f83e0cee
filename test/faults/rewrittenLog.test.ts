import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createRewriteLab, expected, rewriteCases, rewrittenLog } from './rewrittenLogScenario.ts';

// The insider who rewrites the whole log and signs it again (rewrittenLogScenario.ts): each
// caught by the witness folder the engine wrote, at the first witnessed size the rewrite touched.
// No broker: the store and the witness alone.

const lab = await createRewriteLab();
after(() => lab.remove());

for (const c of rewriteCases) {
  test(`${c.name}: audit verify exits ${expected(c)[0]}`, async () => {
    const r = await lab.verify(c);
    const [code, kind] = expected(c);
    assert.equal(r.code, code, JSON.stringify(r.out));
    if (kind !== null) assert.equal(r.out.checkpoints.finding?.kind, kind);
    if (c.rewritesWitness !== true && c.forge !== true) {
      assert.equal(r.out.witness?.finding?.size, r.expectSize, JSON.stringify(r.out.witness));
      assert.ok(r.expectSize !== null);
    }
  });
}

test('the RELIABILITY.md scenario holds every check', async () => {
  const r = await rewrittenLog.run(undefined as never);
  assert.equal(r.hostileAppended, 0, JSON.stringify(r.checks));
  assert.ok(Object.values(r.checks).every(Boolean), JSON.stringify(r.checks));
});
