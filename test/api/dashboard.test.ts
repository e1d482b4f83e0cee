import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, brotliDecompressSync } from 'node:zlib';
import { test } from 'node:test';
import { dashboardCsp } from '../../src/api/routes/dashboard.ts';
import { apiHarness } from '../support/apiHarness.ts';

// How `converge serve` serves the built dashboard: the page at / and /nodes/:node
// only, hashed assets cached for good, everything with a strict Content-Security-Policy, and the
// API's own 404 left alone.

function builtDashboard(): string {
  const dir = mkdtempSync(join(tmpdir(), 'converge-dashboard-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(
    join(dir, 'index.html'),
    '<!doctype html><title>Converge</title><script type="module" src="/assets/index-abc123.js"></script>',
  );
  const js = 'console.log("dashboard");'.repeat(50);
  writeFileSync(join(dir, 'assets', 'index-abc123.js'), js);
  writeFileSync(join(dir, 'assets', 'index-abc123.js.br'), brotliCompressSync(js));
  writeFileSync(join(dir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  return dir;
}

test('the page is served at / and /nodes/:node with a strict CSP, revalidated on every load', async (t) => {
  const dir = builtDashboard();
  const h = await apiHarness({ dashboardDir: dir });
  t.after(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });
  for (const url of ['/', '/nodes/node-001', '/nodes/a%20b?at=12', '/rollouts', '/rollouts/r1?wave=2']) {
    const r = await h.app.inject({ url });
    assert.equal(r.statusCode, 200, url);
    assert.match(r.headers['content-type'] as string, /^text\/html/);
    assert.match(r.body, /<title>Converge<\/title>/);
    assert.equal(r.headers['content-security-policy'], dashboardCsp);
    assert.equal(r.headers['cache-control'], 'no-cache');
    assert.equal(r.headers['x-content-type-options'], 'nosniff');
    assert.equal(r.headers['referrer-policy'], 'no-referrer');
  }
  assert.match(dashboardCsp, /default-src 'none'/);
  assert.match(dashboardCsp, /script-src 'self'(;|$)/);
  assert.doesNotMatch(dashboardCsp, /unsafe|\*|https?:/);
});

test('hashed assets are cached for a year, brotli when accepted, and vary on the encoding', async (t) => {
  const dir = builtDashboard();
  const h = await apiHarness({ dashboardDir: dir });
  t.after(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const plain = await h.app.inject({ url: '/assets/index-abc123.js' });
  assert.equal(plain.statusCode, 200);
  assert.match(plain.headers['content-type'] as string, /javascript/);
  assert.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.equal(plain.headers['content-security-policy'], dashboardCsp);
  assert.equal(plain.headers['vary'], 'accept-encoding');
  assert.ok(plain.headers['etag']);
  const br = await h.app.inject({ url: '/assets/index-abc123.js', headers: { 'accept-encoding': 'br' } });
  assert.equal(br.headers['content-encoding'], 'br');
  assert.equal(brotliDecompressSync(br.rawPayload).toString(), plain.body);
  const icon = await h.app.inject({ url: '/favicon.svg' });
  assert.equal(icon.statusCode, 200);
  assert.equal(icon.headers['cache-control'], 'no-cache');
});

test('only / and /nodes/:node fall back to the page: /v1 and other paths keep the problem+json 404', async (t) => {
  const dir = builtDashboard();
  const h = await apiHarness({ dashboardDir: dir });
  t.after(async () => {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  });
  for (const url of [
    '/v1/nope',
    '/v1/nodes/x/nope',
    '/elsewhere',
    '/nodes',
    '/nodes/a/b',
    '/rollouts/a/b',
    '/assets/missing.js',
    '/index.html',
  ]) {
    const r = await h.app.inject({ url });
    assert.equal(r.statusCode, 404, url);
    assert.match(String(r.headers['content-type']), /^application\/problem\+json/, url);
    assert.equal(r.json().code, 'CONVERGE_ERR_ROUTE_NOT_FOUND', url);
  }
  // API answers are not given the page's caching or policy.
  const api = await h.app.inject({ url: '/healthz' });
  assert.notEqual(api.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.notEqual(api.headers['content-type'], 'text/html; charset=utf-8');
});

test('with no built dashboard, / is not served and the API is unchanged', async (t) => {
  const h = await apiHarness({ dashboardDir: null });
  t.after(() => h.close());
  assert.equal((await h.app.inject({ url: '/' })).statusCode, 404);
  assert.equal((await h.app.inject({ url: '/healthz' })).statusCode, 200);
});
