import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { verifyDeclaration } from '../../src/core/declaration/index.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createSignPool } from '../../src/engine/signPool.ts';
import type { SignPool } from '../../src/engine/signPool.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// POST /v1/declarations as `serve` wires it: the API's bulk sends are signed on the signing
// thread (src/engine/signPool.ts), as the rollout driver's are, and stopping the engine stops it.

test("serve's bulk POST is signed on the signing thread, and stop stops the thread", async (t) => {
  const store = createMemoryEventStore();
  const config = loadConfig(
    { flags: {}, env: {} },
    { store: 'memory:', port: '0', logLevel: 'silent', apiTokens: 'bulk-sender:read,send' },
  );
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
  const engine = createServer({ config, logger, store, key: testKey, dashboardDir: null, driveRollouts: false, signPool: counted });
  t.after(async () => {
    await engine.stop();
    await pool.close();
    await store.close();
  });
  await engine.start();
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
