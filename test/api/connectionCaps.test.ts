import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildAdminApp } from '../../src/api/index.ts';
import { apiHarness, read, write } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';
import { holdGet, silentSocket } from '../support/openStreams.ts';
import type { HeldAnswer } from '../support/openStreams.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// One read token opened 20,000 event streams, the process reached its file
// descriptor limit and every new client, /healthz included, was reset. Against the real HTTP
// server (fastify listening on a port, caps set low): a token over its cap is refused 429 with
// Retry-After and a problem, the engine over its cap 503; another token still gets in; /healthz
// answers on the admin listener and on the main one while the caps are reached; idle sockets are
// closed; a stream ends at its maximum lifetime.

const metric = (text: string, name: string): number | null => {
  const escaped = name.replace(/[{}"]/g, (c) => `\\${c}`);
  const m = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text);
  return m === null ? null : Number(m[1]);
};

type Problem = { code: string; status: number; details?: Record<string, unknown> };

function assertRefused(a: HeldAnswer, status: number, code: string): Problem {
  assert.equal(a.status, status, a.body);
  assert.match(String(a.headers['content-type']), /^application\/problem\+json/);
  assert.match(String(a.headers['retry-after']), /^[1-9]\d*$/, 'Retry-After in whole seconds');
  const p = JSON.parse(a.body) as Problem;
  assert.equal(p.code, code);
  assert.equal(p.status, status);
  return p;
}

async function withServer(
  t: { after: (f: () => Promise<void>) => void },
  extra: Parameters<typeof apiHarness>[0],
): Promise<{ h: ApiHarness; base: string }> {
  const h = await apiHarness(extra);
  t.after(() => h.close());
  const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  return { h, base };
}

/** The admin listener beside the harness's server (probes and metrics), closed after the test; its base URL. */
async function withAdmin(t: { after: (f: () => Promise<void>) => void }, h: ApiHarness): Promise<string> {
  const admin = buildAdminApp({
    readModel: h.runner.readModel,
    store: h.store,
    logger,
    tokens: new Map(),
    projections: h.runner,
    metrics: h.metrics,
  });
  t.after(() => admin.close());
  return admin.listen({ port: 0, host: '127.0.0.1' });
}

test('event streams: a token over its cap is 429, the engine over its cap 503, both with Retry-After; another token gets in; probes answer on both listeners', async (t) => {
  const { h, base } = await withServer(t, { caps: { streams: 3, streamsPerClient: 2, awaits: 10, awaitsPerClient: 10 } });
  const adminBase = await withAdmin(t, h);
  const held: HeldAnswer[] = [];
  t.after(() => held.forEach((a) => a.close()));

  const stream = async (headers: Record<string, string>): Promise<HeldAnswer> => {
    const a = await holdGet(base, '/v1/events', { headers });
    if (a.status === 200) held.push(a);
    return a;
  };

  // One token: two streams, the third refused for that token.
  assert.equal((await stream(read)).status, 200);
  assert.equal((await stream(read)).status, 200);
  const p = assertRefused(await stream(read), 429, 'CONVERGE_ERR_CLIENT_OVER_CAP');
  assert.equal(p.details?.['kind'], 'stream');
  assert.equal(p.details?.['limit'], 2);

  // Another token still gets in, up to the engine's cap; past it, 503 for everyone.
  assert.equal((await stream(write)).status, 200);
  assertRefused(await stream(write), 503, 'CONVERGE_ERR_SERVER_AT_CAP');

  // While capped: the probes answer on the main listener (its connection reserve) and the admin one.
  for (const b of [base, adminBase]) {
    const health = await fetch(`${b}/healthz`);
    assert.equal(health.status, 200, `/healthz on ${b}`);
    assert.equal(((await health.json()) as { ok: boolean }).ok, true);
    assert.equal((await fetch(`${b}/readyz`)).status, 200, `/readyz on ${b}`);
  }
  const text = await (await fetch(`${adminBase}/metrics`)).text();
  assert.equal(metric(text, 'converge_http_open{kind="stream"}'), 3);
  assert.equal(metric(text, 'converge_http_refused_total{kind="stream",reason="client_cap"}'), 1);
  assert.equal(metric(text, 'converge_http_refused_total{kind="stream",reason="server_cap"}'), 1);
  // The admin listener serves only the probes.
  assert.equal((await fetch(`${adminBase}/v1/events`, { headers: read })).status, 404);

  // A stream that ends gives its place back.
  held.shift()!.close();
  await until('the closed stream to be released', async () => {
    const m = await (await fetch(`${adminBase}/metrics`)).text();
    return metric(m, 'converge_http_open{kind="stream"}') === 2;
  });
  assert.equal((await stream(read)).status, 200);
});

test('await: a token over its cap of open long polls is 429 with Retry-After; the released place is given again', async (t) => {
  const { h, base } = await withServer(t, { caps: { streams: 10, streamsPerClient: 10, awaits: 10, awaitsPerClient: 2 } });
  await h.history.send('slow-node');
  await h.settle();
  const polls = [0, 1].map(() => {
    const abort = new AbortController();
    const done = fetch(`${base}/v1/nodes/slow-node/await?timeoutMs=300000`, { headers: read, signal: abort.signal }).catch(() => null);
    return { abort, done };
  });
  t.after(() => polls.forEach((p) => p.abort.abort()));
  const open = async (): Promise<number | null> =>
    metric(await (await fetch(`${base}/metrics`)).text(), 'converge_http_open{kind="await"}');
  await until('both polls to be held', async () => (await open()) === 2);

  const refused = await holdGet(base, '/v1/nodes/slow-node/await?timeoutMs=300000', { headers: read });
  const p = assertRefused(refused, 429, 'CONVERGE_ERR_CLIENT_OVER_CAP');
  assert.equal(p.details?.['kind'], 'await');
  // The other token is not held back by this one's polls.
  const other = new AbortController();
  const otherDone = fetch(`${base}/v1/nodes/slow-node/await?timeoutMs=300000`, { headers: write, signal: other.signal }).catch(() => null);
  await until('the other token to hold a poll', async () => (await open()) === 3);
  other.abort();
  await otherDone;

  polls[0]!.abort.abort();
  await polls[0]!.done;
  await until('the aborted poll to be released', async () => (await open()) === 1);
  // A poll that answers (here: 408 at its timeout) gives its place back too.
  const quick = await fetch(`${base}/v1/nodes/slow-node/await?timeoutMs=1`, { headers: read });
  assert.equal(quick.status, 408);
  assert.equal(await open(), 1);
  polls[1]!.abort.abort(); // before the app closes: closing waits for open requests
  await polls[1]!.done;
});

test('with reads open (no tokens), the cap is per client address', async (t) => {
  const { base } = await withServer(t, { tokens: new Map(), caps: { streams: 10, streamsPerClient: 1, awaits: 10, awaitsPerClient: 1 } });
  const first = await holdGet(base, '/v1/events', { localAddress: '127.0.0.1' });
  t.after(() => first.close());
  assert.equal(first.status, 200);
  assertRefused(await holdGet(base, '/v1/events', { localAddress: '127.0.0.1' }), 429, 'CONVERGE_ERR_CLIENT_OVER_CAP');
  const elsewhere = await holdGet(base, '/v1/events', { localAddress: '127.0.0.2' });
  t.after(() => elsewhere.close());
  assert.equal(elsewhere.status, 200, 'another address is another client');
});

test('idle connections are closed: a socket that never sends a request, one idle after its answer, and a stream past its lifetime', async (t) => {
  const { base } = await withServer(t, { listener: { requestTimeoutMs: 200, idleMs: 200 }, streamMaxMs: 200 });

  // Connects and says nothing: closed at the request timeout, not held forever.
  const silent = await silentSocket(base);
  t.after(() => silent.socket.destroy());
  await silent.closed;

  // Sends a request, reads the answer, then idles: closed at the keep-alive timeout.
  const kept = await silentSocket(base);
  t.after(() => kept.socket.destroy());
  kept.socket.write(`GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\n\r\n`);
  let answer = '';
  kept.socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
  await kept.closed;
  assert.match(answer, /^HTTP\/1\.1 200/);

  // An event stream ends at its maximum lifetime, saying so; the client resumes with Last-Event-ID.
  const s = await holdGet(base, '/v1/events', { headers: read });
  t.after(() => s.close());
  assert.equal(s.status, 200);
  await s.ended;
});

test('a refusal closes its connection, so a refused client holds no socket', async (t) => {
  const { base } = await withServer(t, { caps: { streams: 1, streamsPerClient: 1, awaits: 1, awaitsPerClient: 1 } });
  const a = await holdGet(base, '/v1/events', { headers: read });
  t.after(() => a.close());
  const refused = await holdGet(base, '/v1/events', { headers: read });
  assert.equal(refused.status, 429);
  assert.equal(refused.headers['connection'], 'close');
  await refused.ended;
});

test('past the connection limit of the listener, new sockets are dropped, and the admin listener still answers', async (t) => {
  const { h, base } = await withServer(t, { listener: { maxConnections: 4 } });
  const adminBase = await withAdmin(t, h);
  const sockets = await Promise.all(Array.from({ length: 4 }, () => silentSocket(base)));
  t.after(() => sockets.forEach((s) => s.socket.destroy()));
  await until('the listener to hold four sockets', () => new Promise<boolean>((r) => h.app.server.getConnections((_e, n) => r(n === 4))));
  const over = await silentSocket(base);
  await over.closed; // dropped at once by the server
  const health = await fetch(`${adminBase}/healthz`);
  assert.equal(health.status, 200);
  const text = await (await fetch(`${adminBase}/metrics`)).text();
  assert.equal(metric(text, 'converge_http_refused_total{kind="connection",reason="server_cap"}'), 1);
  sockets.forEach((s) => s.socket.destroy()); // before the app closes: closing waits for them
});
