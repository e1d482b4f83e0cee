import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { loadConfig } from '../../src/app/config.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { serveInProcess } from '../support/serveInProcess.ts';

test('a declaration sent through the engine counts in converge_events_appended_total{type="DeclarationSent"}', async (t) => {
  const { engine } = await serveInProcess(t, createMemoryEventStore(), {
    settings: { apiTokens: 'sender-token-1:read,send' },
    key: generateSigningKey(),
  });
  await engine.send!('m1', [{ id: 'web' }]);
  const posted = await engine.app.inject({
    method: 'POST',
    url: '/v1/nodes/m1/declarations',
    headers: { authorization: 'Bearer sender-token-1' },
    payload: { resources: [{ id: 'web', v: 2 }] },
  });
  assert.equal(posted.statusCode, 202, posted.body);
  const text = (await engine.app.inject({ url: '/metrics' })).body;
  assert.match(text, /^converge_events_appended_total\{type="DeclarationSent"\} 2$/m);
});

test('a last-seen flush as long as the grace period is refused at start: a crash could hide a whole silence', () => {
  assert.throws(
    () => loadConfig({ flags: { store: 'memory:', 'grace-ms': '60000', 'last-seen-flush-ms': '60000' }, env: {} }),
    (e: unknown) =>
      (e as { code?: string }).code === 'CONVERGE_ERR_CONFIG_INVALID' && /last-seen-flush-ms.*grace-ms/.test((e as Error).message),
  );
  assert.equal(
    loadConfig({ flags: { store: 'memory:', 'grace-ms': '60000', 'last-seen-flush-ms': '59999' }, env: {} }).lastSeenFlushMs,
    59_999,
  );
});
