import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { loadConfig } from '../../src/app/config.ts';
import { findDashboardDir } from '../../src/app/dashboardDir.ts';
import { createServer } from '../../src/app/server.ts';
import type { Server } from '../../src/app/server.ts';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { launchChromium, withChromium } from '../support/browser.ts';
import { logger } from '../support/logger.ts';

// The dashboard in a real browser: `serve` on a fresh store with the in-process broker,
// the seed's race played on one node, and what a person sees asserted — behind after the stale
// report, the race marked on the timeline, converged after the matching report without a reload,
// behind again when time travel picks a moment between the two, a declaration sent from the page
// and watched until the node reports it, and the stream saying it dropped and resumed across an
// engine restart. Then the demo fleet, as `npm start` shows it.
//
// Screenshots go to $TMPDIR/converge-screenshots, or to docs/ with CONVERGE_SCREENSHOTS=docs (npm run screenshots).

const root = new URL('../../', import.meta.url).pathname;
const shots = process.env['CONVERGE_SCREENSHOTS'] === 'docs' ? join(root, 'docs') : join(tmpdir(), 'converge-screenshots');
const token = 'e2e-operator-token-0123456789';

/** Everything the page tells the console that a person would call broken. */
function watchPage(page: Page, outage: { on: boolean } = { on: false }): string[] {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // A 401 before the token is given is the API answering as designed, and a refused connection
    // while the test has the engine down is the page retrying; anything else is not.
    // So is the 409 of an evidence bundle that no signed checkpoint covers (this engine signs none).
    if (m.type() !== 'error' || /status of (401|409)/.test(m.text())) return;
    if (outage.on && /ERR_CONNECTION_REFUSED/.test(m.text())) return;
    problems.push(`console: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (r.url().includes(token)) problems.push(`the token is in a URL: ${r.url()}`);
  });
  return problems;
}

const stateBadge = (page: Page, status: string) => page.locator(`[data-testid=node-state] .headline [data-status=${status}]`);

withChromium('dashboard end-to-end', () => {
  describe('dashboard end-to-end', () => {
    let browser: Browser;
    before(async () => {
      assert.ok(findDashboardDir() !== null, 'dist/dashboard is built (npm run build)');
      mkdirSync(shots, { recursive: true });
      browser = await launchChromium();
    });
    after(async () => {
      await browser?.close();
    });

    test('the seed race on one node: behind, race marked, converged live, behind as of a moment between, and the stream resumes', async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'converge-e2e-'));
      const store = createSqliteEventStore(join(dir, 'converge.db'));
      const broker = createInProcessBroker();
      const key = generateSigningKey();
      const config = (port: string) =>
        loadConfig({ flags: { port, host: '127.0.0.1', 'api-tokens': `${token}:read,send` }, env: {} }, { logLevel: 'silent' });
      const start = async (port: string): Promise<[Server, string]> => {
        const engine = createServer({
          config: config(port),
          logger,
          store,
          transport: { ingestSource: broker.ingestSource(), publisher: broker.declarationPublisher() },
          key,
        });
        return [engine, await engine.start()];
      };
      const first = await start('0');
      let engine = first[0];
      const url = first[1];
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
      t.after(async () => {
        await context.close();
        await engine.stop();
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      });

      // The race, as the seed commit tells it: A sent, B sent, A's report lands after B's send.
      const node = 'edge-7';
      const link = broker.nodeLink(node);
      await link.consume(async () => {});
      const report = async (declared: string, id: string): Promise<void> => {
        await link.publish('report', encodeReport({ node, declared, applied: ['web'], failed: {}, refused: '', carried: [] }), id);
      };
      const folded = async (declared: string): Promise<void> => {
        for (let i = 0; i < 500 && engine.runner.readModel.get(node)?.reported?.declared !== declared; i++)
          await new Promise((r) => setTimeout(r, 10));
        assert.equal(engine.runner.readModel.get(node)?.reported?.declared, declared);
      };
      const a = await engine.send!(node, [{ id: 'web', image: 'registry.local/web:1' }]);
      await new Promise((r) => setTimeout(r, 30));
      const b = await engine.send!(node, [{ id: 'web', image: 'registry.local/web:2' }]);
      await new Promise((r) => setTimeout(r, 30));
      await report(a.digest, 'report-a');
      await folded(a.digest);
      await new Promise((r) => setTimeout(r, 1_100));
      const between = new Date().toISOString();
      await new Promise((r) => setTimeout(r, 1_100));

      const page = await context.newPage();
      const outage = { on: false };
      const problems = watchPage(page, outage);
      let navigations = 0;
      page.on('framenavigated', (f) => {
        if (f === page.mainFrame()) navigations++;
      });
      await page.goto(`${url}/nodes/${node}`);

      // Asked for the token in place of the page: no "Loading…", no connection state (which would
      // read "Disconnected", once as "-221 ms"), and it says where a token comes from.
      const prompt = page.getByRole('main').locator('.token-form');
      await prompt.waitFor();
      assert.match((await prompt.textContent()) ?? '', /--api-tokens.*converge demo/s);
      assert.equal(await page.locator('[data-stream]').count(), 0, 'no connection state before a token');
      assert.equal(await page.locator('[aria-busy=true]').count(), 0, 'no "Loading…" before a token');
      // Asked once; it goes to session storage, not into the URL.
      await page.locator('#token-input').fill(token);
      await page.getByRole('button', { name: 'Use token' }).click();
      assert.equal(
        await page.evaluate(() =>
          (globalThis as unknown as { sessionStorage: { getItem: (k: string) => string | null } }).sessionStorage.getItem('converge.token'),
        ),
        token,
      );
      assert.ok(!page.url().includes(token));

      await stateBadge(page, 'behind').waitFor();
      assert.match((await page.locator('[data-testid=reported-digest]').getAttribute('title')) ?? '', new RegExp(a.digest));
      assert.match((await page.locator('[data-testid=sent-digest]').getAttribute('title')) ?? '', new RegExp(b.digest));
      // One digest length on every part of the page, the whole digest in the tooltip.
      await page.locator('[data-testid=timeline] [data-type=ReportReceived]').first().waitFor();
      const digests = await page.locator('code[title]').evaluateAll((els) => els.map((e) => [e.textContent, e.getAttribute('title')]));
      const full = digests.filter(([, title]) => /^[0-9a-f]{64}$/.test(title ?? ''));
      assert.ok(full.length >= 4, `digests on the page: ${JSON.stringify(digests)}`);
      for (const [text, title] of full) assert.equal(text, title!.slice(0, 12));
      // Time travel is one compact bar, not a panel over the top of the page.
      const bar = await page.locator('section.timetravel').boundingBox();
      assert.ok(bar !== null && bar.height < 60, `the time-travel bar is ${bar?.height} px high`);
      const race = page.locator('[data-testid=race]');
      await race.waitFor();
      assert.equal(await race.count(), 1);
      const sentence = (await race.textContent()) ?? '';
      assert.match(sentence, /race/);
      assert.match(sentence, /names declaration #1 but arrived .* after #2 was sent/);
      assert.match(sentence, /keeps it behind/);
      // The conditions say why in the API's words (docs/api.md#conditions).
      const conditions = page.locator('[data-testid=node-conditions]').first();
      assert.match((await conditions.textContent()) ?? '', /ConvergedFalse\s*StaleReport/);

      // The matching report arrives: the page turns converged by itself.
      const navigationsBefore = navigations;
      await report(b.digest, 'report-b');
      await stateBadge(page, 'converged').waitFor();
      assert.equal(navigations, navigationsBefore, 'no reload');
      await page.locator('[data-testid=timeline] [data-type=ReportReceived]').nth(1).waitFor();
      await page.screenshot({ path: join(shots, 'dashboard-node.png'), fullPage: true });

      // Time travel to a moment between the two reports: behind, as it was then.
      await page.locator('#node-tt-at').fill(between);
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await page.locator('[data-testid=node-state] h2', { hasText: 'As of' }).waitFor();
      await stateBadge(page, 'behind').waitFor();
      assert.ok(new URL(page.url()).searchParams.get('at') !== null);
      // The evidence bundle of the moment shown: with no audit key no checkpoint covers it, so the page says so and
      // offers the unsigned one, fetched with the token in its header and saved as a file.
      await page.getByRole('button', { name: 'Download evidence bundle' }).click();
      await page.locator('[role=alert]', { hasText: 'No signed checkpoint covers this moment yet.' }).waitFor();
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name: 'Download unsigned' }).click(),
      ]);
      assert.match(download.suggestedFilename(), new RegExp(`^evidence-${node}-`));
      const saved = JSON.parse(readFileSync(await download.path(), 'utf8')) as { signed: boolean; answer: { status: string } };
      assert.deepEqual([saved.signed, saved.answer.status], [false, 'behind']);
      // Back to live from the keyboard.
      await page.getByRole('button', { name: 'Live', exact: true }).focus();
      await page.keyboard.press('Enter');
      await stateBadge(page, 'converged').waitFor();

      // Send from the page: a typo is shown inline and blocks the send; a valid spec is signed,
      // recorded and sent, and the page waits until the node reports its digest.
      const spec = page.locator('#spec');
      // Nothing is pre-filled: the sample is a placeholder, and there is nothing to send yet.
      assert.equal(await spec.inputValue(), '');
      assert.match((await spec.getAttribute('placeholder')) ?? '', /resources/);
      assert.equal(await page.getByRole('button', { name: `Sign and send to ${node}` }).isDisabled(), true);
      assert.equal(await page.locator('#spec-problems li').count(), 0);
      await spec.fill('{"resources": [{"id": "web"}, {"id": "web"}]}');
      await page.locator('#spec-problems li', { hasText: 'is used twice' }).waitFor();
      assert.equal(await page.getByRole('button', { name: `Sign and send to ${node}` }).isDisabled(), true);
      await spec.fill('{"resources": [{"id": "web", "image": "registry.local/web:3"}]}');
      await page.getByRole('button', { name: `Sign and send to ${node}` }).click();
      await page.locator('[data-testid=send-status]', { hasText: 'Waiting' }).waitFor();
      const third = engine.runner.readModel.get(node)?.sent;
      assert.equal(third?.serial, 3);
      await report(third.digest, 'report-c');
      await page.locator('[data-testid=send-status]', { hasText: 'the node reported this digest' }).waitFor();
      await stateBadge(page, 'converged').waitFor();

      // The engine restarts: the page says the stream dropped, then that it resumed.
      const port = new URL(url).port;
      outage.on = true;
      await engine.stop();
      await page.locator('[data-stream=disconnected]').waitFor({ timeout: 10_000 });
      engine = (await start(port))[0];
      await page.locator('[data-stream=live]', { hasText: 'resumed after' }).waitFor({ timeout: 15_000 });
      outage.on = false;

      assert.deepEqual(problems, []);
    });

    test('the demo fleet: npm start prints the dashboard URL, and the fleet page shows it converging live', async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'converge-e2e-demo-'));
      const child = spawn(
        process.execPath,
        [join(root, 'bin/converge.js'), 'demo', '--nodes', '40', '--port', '0', '--interval-ms', '1500', '--duration', '60000'],
        { cwd: dir, env: { ...process.env, CONVERGE_STORE: `sqlite:${join(dir, 'demo.db')}` }, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
      t.after(async () => {
        await context.close();
        child.kill('SIGINT');
        await new Promise((r) => child.once('exit', r));
        rmSync(dir, { recursive: true, force: true });
      });
      for (let i = 0; i < 300 && !/dashboard http/.test(stderr); i++) await new Promise((r) => setTimeout(r, 50));
      const dashboard = /dashboard (http:\/\/\S+\/)/.exec(stderr)?.[1];
      const demoToken = /Bearer (\S+)\)/.exec(stderr)?.[1];
      assert.ok(dashboard !== undefined, `the demo prints the dashboard URL:\n${stderr}`);
      assert.ok(demoToken !== undefined);

      const page = await context.newPage();
      const problems = watchPage(page);
      await page.goto(dashboard);
      await page.locator('#token-input').fill(demoToken);
      await page.getByRole('button', { name: 'Use token' }).click();
      await page.locator('[data-testid=fleet-counts] h2', { hasText: '40 nodes' }).waitFor({ timeout: 15_000 });
      await page.locator('[data-stream=live]').waitFor();
      // Live: the stale count (the slow nodes' races) grows without a reload.
      const stale = page.locator('[data-testid=anomaly-stale]');
      // (polled from here: the page's CSP rightly refuses the string eval waitForFunction would use)
      for (let i = 0; i < 200 && Number(await stale.textContent()) === 0; i++) await page.waitForTimeout(100);
      assert.ok(Number(await stale.textContent()) > 0, 'the stale count rose without a reload');
      await page.locator('table.nodes tbody tr').first().waitFor();
      assert.equal(await page.locator('table.nodes tbody tr').count(), 40);
      // The table filters in the API: the refusing node alone.
      await page.getByRole('form', { name: 'Filter nodes' }).getByLabel('Status').selectOption('refused');
      await page.locator('table.nodes caption', { hasText: 'of 1' }).waitFor();
      const refusing = (await page.locator('table.nodes tbody th a').first().textContent()) ?? '';
      // Needs attention names it too, and links to its page.
      const attentionRefused = page.locator('[data-testid=attention-refused] li a', { hasText: refusing });
      await attentionRefused.waitFor();
      assert.equal(await attentionRefused.getAttribute('href'), `/nodes/${refusing}`);
      await page.getByRole('form', { name: 'Filter nodes' }).getByLabel('Status').selectOption('');
      await page.locator('table.nodes caption', { hasText: 'of 40' }).waitFor();
      await page.getByLabel('Per page').selectOption('25');
      await page.locator('table.nodes caption', { hasText: 'Nodes 1–25 of 40' }).waitFor();
      await page.waitForTimeout(2_000);
      await page.screenshot({ path: join(shots, 'dashboard-fleet.png'), fullPage: true });

      // Drag time back: as of the first position (the engine starting to observe) the fleet had no
      // node yet; the slider answers the keyboard.
      const slider = page.locator('#fleet-tt-slider');
      await slider.focus();
      await page.keyboard.press('Home');
      await page.locator('[data-testid=fleet-tt-shown]', { hasText: 'As of position 1' }).waitFor();
      await page.locator('[data-testid=fleet-counts] h2', { hasText: /^0 nodes$/ }).waitFor();
      await page.keyboard.press('End');
      await page.getByRole('button', { name: 'Live', exact: true }).click();
      await page.locator('[data-testid=fleet-counts] h2', { hasText: '40 nodes' }).waitFor();

      // The cohort table fits its card, two cards a row as on a small laptop: no heading is cut off.
      await page.setViewportSize({ width: 900, height: 900 });
      const cohorts = await page.locator('table.cohorts').evaluate((t) => [t.scrollWidth, t.closest('section')!.clientWidth]);
      assert.ok(cohorts[0]! < cohorts[1]!, `the cohort table is ${cohorts[0]} px wide in a ${cohorts[1]} px card`);
      await page.setViewportSize({ width: 1280, height: 900 });

      // A slow node's page shows its races.
      await page.locator('table.nodes').getByRole('link', { name: 'node-001' }).click();
      await page.locator('[data-testid=race]').first().waitFor({ timeout: 15_000 });
      await page.locator('[data-testid=node-state]').waitFor();
      assert.deepEqual(problems, []);
    });
  });
});
