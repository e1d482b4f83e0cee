import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import type { Server } from '../../src/app/server.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// A catch-up that holds the event loop (a 1,000,000-target rollout did, 70 s in one batch of the
// quadratic fold) made @fastify/static miss Fastify's plugin timeout: `serve` exited 1 on every
// start. The API's plugins load and its socket opens before the projections read the store, so
// the probes answer at once and /readyz says how far the catch-up is.

test('a store whose catch-up is slow starts anyway: /healthz at once, /readyz 503 catching up with its progress, then ready', async (t) => {
  const inner = createMemoryEventStore();
  const h = historyInStore(inner);
  for (let i = 0; i < 3; i++) await h.report(`n-${i}`);
  let release = (): void => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let engine: Server | null = null;
  let listeningAtFirstRead: boolean | null = null;
  // The projections' first read holds the event loop longer than the plugins may take to load,
  // then waits for the test: the catch-up is in progress for as long as the test looks.
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      // The catch-up reads through readAll or, for the bulk fold, readColumns: hold whichever comes first.
      if (key === 'readAll' || key === 'readColumns')
        return async function* (...args: unknown[]) {
          if (listeningAtFirstRead === null) {
            listeningAtFirstRead = engine?.app.server.listening ?? false;
            const end = Date.now() + 1_500;
            while (Date.now() < end) {
              // held, as by a long fold
            }
            await released;
          }
          yield* (target[key] as (...a: unknown[]) => AsyncIterable<unknown>)(...args);
        };
      const v: unknown = Reflect.get(target, key, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as EventStore;
  const dashboard = new URL('../fixtures/dashboard', import.meta.url).pathname;
  const config = loadConfig({ flags: {}, env: {} }, { store: 'memory:', port: '0', logLevel: 'silent', apiTokens: 'slow-reader:read' });
  engine = createServer({ config, logger, store, dashboardDir: dashboard, pluginTimeoutMs: 1_000 });
  t.after(async () => {
    release();
    await engine?.stop();
    await inner.close();
  });
  const base = await engine.start();
  assert.equal(listeningAtFirstRead, true, 'the API was loaded and listening before the projections read the store');
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  const ready = await fetch(`${base}/readyz`);
  assert.equal(ready.status, 503);
  const problem = (await ready.json()) as { code: string; detail: string; details: { lag: string; position: string | null; head: string } };
  assert.equal(problem.code, 'CONVERGE_ERR_NOT_READY');
  assert.match(problem.detail, /^catching up: projections are 3 events behind the store/);
  assert.deepEqual(problem.details, { lag: '3', position: null, head: '3' });
  release();
  await until('ready once caught up', async () => (await fetch(`${base}/readyz`)).status === 200);
});
