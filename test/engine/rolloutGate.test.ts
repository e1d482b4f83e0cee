import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { explainLine, explainRollout } from '../../src/readModel/rolloutExplain.ts';
import { rolloutFleet } from '../support/rolloutFleet.ts';
import { until } from '../support/until.ts';

// docs/design.md §8 "Gates": before each wave after the first the driver POSTs to the plan's gate,
// a real HTTP server here. A no holds the wave, recorded; a yes later opens it; and a gate that
// does not answer holds up no other rollout.

async function gateServer(answer: (body: Record<string, unknown>, res: ServerResponse) => void) {
  const bodies: Record<string, unknown>[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      bodies.push(body);
      answer(body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/gate`;
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return { url, bodies, close };
}

test('a gate that says no holds the next wave; once it says yes the wave opens', async () => {
  let open = false;
  const gate = await gateServer((_, res) => {
    res.writeHead(open ? 200 : 503, { 'content-type': 'text/plain' });
    res.end(open ? 'ok' : 'error rate 4%');
  });
  const f = await rolloutFleet({ driver: { gate: { retryMs: 1_000, maxRetryMs: 1_000 } } });
  try {
    const nodes = ['g1', 'g2', 'g3'];
    const id = await f.start({
      rollout: 'gated',
      selection: { kind: 'nodes', nodes },
      waves: '1,100%',
      gate: { url: gate.url, timeoutMs: 5_000 },
    });
    const held = await until('the gate to hold wave 2', async () => {
      await f.settle();
      const s = await f.rollout(id);
      return s.gate?.passed === false ? s : null;
    });
    // Wave 1 completed; wave 2 did not open, and nothing was sent to its nodes.
    assert.equal(held.current, 1);
    assert.notEqual(held.waves[0]!.completed, null);
    assert.equal(held.gate?.wave, 2);
    assert.equal(held.gate?.status, 503);
    assert.equal((await f.sentTo('g2')).length, 0);
    assert.deepEqual(
      [gate.bodies[0]?.['rollout'], gate.bodies[0]?.['wave'], gate.bodies[0]?.['done'], gate.bodies[0]?.['targets']],
      ['gated', 2, 1, 3],
    );

    open = true;
    // The retry waits on the driver's monotonic clock: move it past the backoff.
    const done = await until('the rollout to complete once the gate says yes', async () => {
      f.tick(1_001);
      await f.settle();
      const s = await f.rollout(id);
      return s.status === 'completed' ? s : null;
    });
    assert.equal(done.completed?.done, 3);
    const types = (await f.events(id)).map((e) => (e.type === 'WaveGateChecked' ? `gate:${e.data.passed}` : e.type));
    const firstYes = types.indexOf('gate:true');
    assert.ok(types.indexOf('gate:false') < firstYes && firstYes < types.lastIndexOf('WaveStarted'), types.join(' '));
    const story = (await explainRollout(f.store, id)).entries.map(explainLine).join('\n');
    assert.match(story, /wave 2 held at the gate: 503: error rate 4% \(call 1;/);
    assert.match(story, /wave 2: the gate answered 200: ok: the wave may open/);
  } finally {
    await f.stop();
    await gate.close();
  }
});

test('a gate that does not answer holds only its own rollout: another one runs to the end meanwhile', async () => {
  const gate = await gateServer(() => {
    // never answers: the request stays open until the server closes
  });
  const f = await rolloutFleet();
  try {
    const slow = await f.start({
      rollout: 'slow',
      selection: { kind: 'nodes', nodes: ['s1', 's2'] },
      waves: '1,100%',
      gate: { url: gate.url, timeoutMs: 300_000 },
    });
    await until('the slow rollout to ask its gate', () => gate.bodies.length > 0);
    const other = await f.start({ rollout: 'other', selection: { kind: 'nodes', nodes: ['o1', 'o2'] }, waves: '1,100%' });
    await until('the other rollout to complete while the gate hangs', async () => {
      await f.settle();
      return (await f.rollout(other)).status === 'completed';
    });
    const s = await f.rollout(slow);
    assert.equal(s.current, 1);
    assert.equal(s.gate, null, 'no answer yet, so nothing recorded');
  } finally {
    await f.stop();
    await gate.close();
  }
});

test('a gate that does not answer is let go when the driver stops: no request of its outlives the stop', async () => {
  // An open request kept serve's process alive after its stop, up to the gate's timeout (5 minutes here).
  let closed = false;
  const gate = await gateServer((_, res) => res.once('close', () => (closed = true)));
  const f = await rolloutFleet({ behaviour: { h1: 'apply', h2: 'apply' } });
  try {
    await f.start({
      rollout: 'hanging',
      selection: { kind: 'nodes', nodes: ['h1', 'h2'] },
      waves: '1,100%',
      gate: { url: gate.url, timeoutMs: 300_000 },
    });
    await until('the gate to be asked', async () => {
      await f.settle();
      return gate.bodies.length > 0;
    });
    await f.stop();
    await until('the gate request to be ended by the stop', () => closed);
    assert.equal((await f.rollout('hanging')).gate, null, 'ended by the stop, not answered: nothing recorded');
  } finally {
    await gate.close();
  }
});
