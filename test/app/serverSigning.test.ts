import assert from 'node:assert/strict';
import { test } from 'node:test';
import { verifyDeclaration } from '../../src/core/declaration/index.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createSignPool } from '../../src/engine/signPool.ts';
import type { SignPool } from '../../src/engine/signPool.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { until } from '../support/until.ts';

// POST /v1/declarations as `serve` wires it: the API's bulk sends are signed on the signing
// thread (src/engine/signPool.ts), as the rollout driver's are, and stopping the engine stops it.

test("serve's bulk POST is signed on the signing thread, and stop stops the thread", async (t) => {
  const store = createMemoryEventStore();
  const pool = createSignPool({ key: testKey });
  let signed = 0;
  let closed = 0;
  const counted: SignPool = {
    ...pool,
    sign: (now, items) => {
      signed += items.length;
      return pool.sign(now, items);
    },
    close: async () => {
      closed++;
      await pool.close();
    },
  };
  const { engine } = await serveInProcess(t, store, {
    settings: { apiTokens: 'bulk-sender:read,send' },
    key: testKey,
    driveRollouts: false,
    signPool: counted,
  });
  t.after(() => pool.close());
  // A thread still loading is not waited for (those sends are signed on the engine's thread).
  pool.start();
  await until('the signing thread to load', () => pool.ready());

  const nodes = ['bulk-a', 'bulk-b', 'bulk-c'];
  const r = await engine.app.inject({
    method: 'POST',
    url: '/v1/declarations',
    headers: { authorization: 'Bearer bulk-sender' },
    payload: nodes.map((node) => ({ node, resources: [{ id: 'web', image: 'nginx:1.27' }] })),
  });
  assert.equal(r.statusCode, 202, r.body);
  assert.equal((r.json() as { sent: number }).sent, 3);
  assert.equal(signed, 3, 'each declaration was signed on the thread');
  for (const node of nodes) {
    const [sent] = await store.readStream(streamOf(node));
    const d = sent!.data as { declaration: string; signature: string };
    assert.ok(verifyDeclaration(Buffer.from(d.declaration, 'base64'), Buffer.from(d.signature, 'base64'), testKey), node);
  }
  await engine.stop();
  assert.equal(closed, 1, 'stop stops the signing thread');
});
