import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';
import type { TestContext } from 'node:test';
import type { Server } from '../../src/app/server.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { until } from '../support/until.ts';

// serve's stop with the API's clients still connected (docs/operations.md#shutting-down). Closing the
// API waited for every request it held: an await until its timeoutMs (up to 5 minutes), and any
// socket whose answer was in flight at the stop, kept alive afterwards until --idle-timeout-ms (as
// long as the 10 s --stop-timeout-ms was by default), so the stop ran past its bound and serve exited 1. Each
// test sets those waits far beyond its own deadline (`until`'s 60 s): a stop that waits on them fails.

type Answer = Readonly<{ status: number; headers: http.IncomingHttpHeaders; body: string }>;

/** A GET on a kept-alive socket, as browsers and fetch keep theirs; rejects if the socket is cut. */
function get(agent: http.Agent, base: string, path: string): Promise<Answer> {
  const u = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = http.get(u, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function started(t: TestContext, store: EventStore, env: Record<string, string> = {}): Promise<{ engine: Server; base: string }> {
  // An idle kept-alive socket would hold the stop ten minutes, a request node cuts at its request
  // timeout five, and the API's share of the stop's bound (a quarter) is fifteen: all far past
  // the test's deadline, unless a test sets them.
  const { engine, url } = await serveInProcess(t, store, {
    settings: { idleTimeoutMs: '600000', requestTimeoutMs: '300000', stopTimeoutMs: '3600000', ...env },
    caughtUp: true,
  });
  return { engine, base: url };
}

/** The stop, or a failure naming what it was still waiting on once `until`'s deadline passed. */
async function stopped(engine: Server): Promise<void> {
  let done = false;
  const stop = engine.stop().then(() => void (done = true));
  await until('the stop to finish with API clients still connected', () => done);
  await stop;
}

test('a stop answers an await still waiting with 503 CONVERGE_ERR_STOPPING instead of holding until its timeoutMs', async (t) => {
  const store = createMemoryEventStore();
  await historyInStore(store).send('n-1');
  const { engine, base } = await started(t, store);
  const agent = new http.Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const waiting = get(agent, base, '/v1/nodes/n-1/await?timeoutMs=300000');
  await until('the await to be held', async () =>
    (await engine.metrics.httpOpen.get()).values.some((v) => v.labels.kind === 'await' && v.value === 1),
  );
  await stopped(engine);
  const answer = await waiting;
  assert.equal(answer.status, 503, answer.body);
  assert.equal((JSON.parse(answer.body) as { code: string }).code, 'CONVERGE_ERR_STOPPING');
});

/** A store whose stream reads wait for `release()`: a history request is in flight as long as the test likes. */
async function heldStore(t: TestContext): Promise<{ store: EventStore; reading: () => boolean; release: () => void }> {
  const inner = createMemoryEventStore();
  await historyInStore(inner).report('n-1');
  let reading = false;
  let release = (): void => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  t.after(() => release());
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'readStream')
        return async (...args: Parameters<EventStore['readStream']>) => {
          reading = true;
          await released;
          return target.readStream(...args);
        };
      const v: unknown = Reflect.get(target, key, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as EventStore;
  return { store, reading: () => reading, release };
}

test('a request answered during the stop closes its socket: no kept-alive connection holds the stop', async (t) => {
  const { store, reading, release } = await heldStore(t);
  const { engine, base } = await started(t, store);
  const agent = new http.Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const reply = get(agent, base, '/v1/nodes/n-1/history');
  await until('the history read to be in flight', reading);
  let done = false;
  const stop = engine.stop().then(() => void (done = true));
  await until('the API to stop accepting', () => !engine.app.server.listening);
  release();
  const answer = await reply;
  assert.equal(answer.status, 200, answer.body);
  assert.equal(answer.headers.connection, 'close');
  await until('the stop to finish once the answer is out', () => done);
  await stop;
});

test('a request still unanswered past the API share of --stop-timeout-ms is cut, and the stop goes on', async (t) => {
  const { store, reading } = await heldStore(t);
  // A quarter of 2 s: the history read is never released, so only the cut ends the request.
  const { engine, base } = await started(t, store, { stopTimeoutMs: '2000' });
  const agent = new http.Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  // Its failure, taken as it comes (during the stop), to be looked at after.
  const reply = get(agent, base, '/v1/nodes/n-1/history').then(
    (a) => a,
    (err: Error) => err,
  );
  await until('the history read to be in flight', reading);
  await stopped(engine);
  const outcome = await reply;
  assert.ok(outcome instanceof Error, `the request was answered: ${JSON.stringify(outcome)}`);
  assert.match(outcome.message, /socket hang up|ECONNRESET/);
});

test('a socket that never sends a request is cut at the API share of --stop-timeout-ms too', async (t) => {
  // Node closes only the sockets idle between two requests at a close, and stops timing out the
  // others: a preconnected socket that sends nothing held the soak's stop until its client let go.
  const store = createMemoryEventStore();
  const { engine, base } = await started(t, store, { stopTimeoutMs: '2000' });
  const u = new URL(base);
  const socket = net.connect({ host: u.hostname, port: Number(u.port) });
  t.after(() => socket.destroy());
  let ended = false;
  socket.on('close', () => (ended = true));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  await until('the server to hold the socket', () => new Promise<boolean>((r) => engine.app.server.getConnections((_e, n) => r(n === 1))));
  await stopped(engine);
  await until('the socket to be closed by the server', () => ended);
});

test('an open event stream ends cleanly at the stop, without waiting for its lifetime or the API share of the bound', async (t) => {
  const store = createMemoryEventStore();
  const { engine, base } = await started(t, store);
  const agent = new http.Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  let text = '';
  let ended: 'end' | Error | null = null;
  const req = http.get(new URL('/v1/events', base), { agent }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (c: string) => (text += c));
    res.on('end', () => (ended ??= 'end'));
    res.on('error', (err) => (ended ??= err));
  });
  req.on('error', (err) => (ended ??= err));
  await until('the stream to be open', () => text.includes(': connected'));
  await stopped(engine);
  await until('the stream to end', () => ended);
  assert.equal(ended, 'end', String(ended));
});
