import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { loadConfig } from '../../src/app/config.ts';
import { findDashboardDir } from '../../src/app/dashboardDir.ts';
import { createServer } from '../../src/app/server.ts';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { launchChromium, withChromium } from '../support/browser.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';
import { until } from '../support/until.ts';

// The rollouts pages in a real browser: `serve` on a fresh store, a rollout started
// over the API, its waves opened and sent by rolloutInStore (as the engine's driver would), and what
// a person sees, without reloading: the rollout appearing in the list, a stale report leaving its
// node pending, the matching one making it done, a refusal counted against the budget, pause and
// resume from the page, and the rollout completing.

const token = 'e2e-rollout-token-0123456789';

function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 401/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  return problems;
}

withChromium('rollouts dashboard end-to-end', () => {
  describe('rollouts dashboard end-to-end', () => {
    let browser: Browser;
    before(async () => {
      assert.ok(findDashboardDir() !== null, 'dist/dashboard is built (npm run build)');
      browser = await launchChromium();
    });
    after(async () => {
      await browser?.close();
    });

    test('a rollout watched live: listed, a stale report keeps its node pending, done on the matching one, paused, resumed, completed', async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'converge-e2e-rollouts-'));
      const store = createSqliteEventStore(join(dir, 'converge.db'));
      const broker = createInProcessBroker();
      const engine = createServer({
        config: loadConfig(
          { flags: { port: '0', host: '127.0.0.1', 'api-tokens': `${token}:read,send` }, env: {} },
          { logLevel: 'silent' },
        ),
        logger,
        store,
        transport: { ingestSource: broker.ingestSource(), publisher: broker.declarationPublisher() },
        key: generateSigningKey(),
        // rolloutInStore takes the driver's decisions here, on the test's schedule.
        driveRollouts: false,
      });
      const url = await engine.start();
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      t.after(async () => {
        await context.close();
        await engine.stop();
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      });

      const h = historyInStore(store, Date.now());
      const previous = await h.send('n1', [{ id: 'web', image: 'web:1' }]);
      await h.send('n2', [{ id: 'web', image: 'web:1' }]);
      await h.send('n3', [{ id: 'web', image: 'web:1' }]);

      const page = await context.newPage();
      const problems = watchPage(page);
      let navigations = 0;
      page.on('framenavigated', (f) => {
        if (f === page.mainFrame()) navigations++;
      });
      await page.goto(`${url}/rollouts`);
      await page.locator('#token-input').fill(token);
      await page.getByRole('button', { name: 'Use token' }).click();
      await page.locator('[data-testid=no-rollouts]').waitFor();

      const started = await fetch(`${url}/v1/rollouts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          rollout: 'web-2',
          resources: [{ id: 'web', image: 'web:2' }],
          selection: { kind: 'nodes', nodes: ['n1', 'n2', 'n3'] },
          waves: '1,100%',
          maxFailures: '1',
          waveTimeoutMs: 600_000,
        }),
      });
      assert.equal(started.status, 202, await started.text());
      // The list learns of it from the stream, without a reload.
      const row = page.locator('[data-testid=rollouts] tr[data-rollout=web-2]');
      await row.waitFor();
      await row.getByRole('link', { name: 'web-2' }).click();
      await page.getByRole('heading', { name: 'Rollout web-2' }).waitFor();

      const r = rolloutInStore(store, h, 'web-2', []);
      await r.run();
      const wave1 = page.locator('[data-testid=waves] li[data-wave="1"]');
      await wave1.locator('[data-part=pending] strong', { hasText: '1' }).waitFor();

      // The seed's race: n1's report about its previous declaration lands after the rollout's send.
      h.tick(300);
      await h.report('n1', { applied: ['web'], declared: previous.digest });
      await page.locator('[data-testid=rollout-nodes] tr[data-node=n1]', { hasText: 'stale' }).waitFor();
      assert.equal(await wave1.locator('[data-part=done] strong').textContent(), '0', 'a stale report completes nothing');

      h.tick(200);
      await h.report('n1', { applied: ['web'], declared: await r.digestSentTo('n1') });
      await wave1.locator('[data-part=done] strong', { hasText: '1' }).waitFor();
      await page.locator('[data-testid=latency]', { hasText: 'p50' }).waitFor();

      await page.getByRole('button', { name: 'Pause' }).click();
      await page.locator('.page-head ~ section [data-rollout-status=paused]').waitFor();
      await page.getByRole('button', { name: 'Resume' }).click();
      await page.locator('.page-head ~ section [data-rollout-status=running]').waitFor();

      await r.run();
      await h.report('n2', { refused: 'no room', declared: await r.digestSentTo('n2') });
      await h.report('n3', { applied: ['web'], declared: await r.digestSentTo('n3') });
      await page.locator('[data-testid=budget]', { hasText: '1 of 1 used' }).waitFor();
      await r.run();
      await page.locator('.page-head ~ section [data-rollout-status=completed]').waitFor();
      await page.goto(`${url}/rollouts`);
      await page.locator('[data-testid=rollouts] tr[data-rollout=web-2] [data-rollout-status=completed]').waitFor();
      assert.equal(await page.locator('[data-testid=rollouts] tr[data-rollout=web-2] [data-col=done]').textContent(), '2');
      assert.ok(navigations <= 3, `no reloads beyond the two visits: ${navigations} navigations`);

      // The rollback button asks first: dismissed, nothing is recorded; accepted, the rollback begins.
      await row.getByRole('link', { name: 'web-2' }).click();
      await page.locator('.page-head ~ section [data-rollout-status=completed]').waitFor();
      let asked = '';
      page.once('dialog', (d) => {
        asked = d.message();
        void d.dismiss();
      });
      await page.getByRole('button', { name: 'Roll back' }).click();
      await until('the confirmation to be asked', () => asked !== '');
      assert.match(asked, /Roll back rollout web-2\?/);
      const status = async (): Promise<string> =>
        ((await (await fetch(`${url}/v1/rollouts/web-2`, { headers: { authorization: `Bearer ${token}` } })).json()) as { status: string })
          .status;
      assert.equal(await status(), 'completed', 'a dismissed confirmation records nothing');
      page.once('dialog', (d) => void d.accept());
      await page.getByRole('button', { name: 'Roll back' }).click();
      await page.locator('.page-head ~ section [data-rollout-status=rollingBack]').waitFor();
      assert.equal(await status(), 'rollingBack');
      // Once rolling back, the button is gone: a rollback happens once per rollout.
      assert.equal(await page.getByRole('button', { name: 'Roll back' }).count(), 0);
      assert.deepEqual(problems, []);
    });
  });
});
