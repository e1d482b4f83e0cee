import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestContext } from 'node:test';
import { observationStream, streamOf } from '../../src/core/events/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { encodeAlive } from '../../src/core/wire/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { createBrokerLab, describeOnBroker, uniqueTag } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import type { FaultProxy } from '../support/faults/faultProxy.ts';
import { logger } from '../support/logger.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { until } from '../support/until.ts';

// docs/design.md §3 "Not observed": while the engine's link to the broker is cut it hears no
// node, so it must not judge silences; the record says not-observed for that span
// (ObservationStopped 'broker-lost', then ObservationStarted once it consumes again), never
// disconnected for a node that kept saying it is alive on the other side of the cut.

const graceMs = 1_500;
const read = { authorization: 'Bearer reader-token' };
const ms = (text: string): number => Date.parse(text);

type Cut = Readonly<{ name: string; cut: (p: FaultProxy) => void; heal: (p: FaultProxy) => void }>;

const cuts: readonly Cut[] = [
  {
    // The broker goes away: connections reset, new ones refused. Noticed at once.
    name: 'reset and refused',
    cut: (p) => {
      p.refuse(true);
      p.reset();
    },
    heal: (p) => p.refuse(false),
  },
  {
    // A partition: nothing passes and nothing closes; noticed through AMQP heartbeats (1 s here).
    name: 'blackholed',
    cut: (p) => p.blackhole(),
    heal: (p) => p.pass(),
  },
];

type Defer = (cleanup: () => Promise<void> | void) => void;

/** Cleanups run after the test, last in first out: an engine stops before the store it writes to closes. */
function deferrer(t: TestContext): Defer {
  const cleanups: (() => Promise<void> | void)[] = [];
  t.after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  return (cleanup) => void cleanups.push(cleanup);
}

/** An engine as serve wires it (ingest, observer, API) over AMQP at `url`; `stop` is idempotent, also run after the test, and then `store` is closed. */
async function startEngine(defer: Defer, url: string, store: EventStore, engineId: string) {
  const { engine, transport, stop } = await serveInProcess({ after: defer }, store, {
    settings: { apiTokens: 'reader-token:read', graceMs: String(graceMs), lastSeenFlushMs: '200', engineId },
    broker: { amqp: url, heartbeatSeconds: 1 },
    driveRollouts: false,
  });
  const stateAt = async (node: string, at: number): Promise<string> => {
    const r = await engine.app.inject({ method: 'GET', url: `/v1/nodes/${node}/state?at=${new Date(at).toISOString()}`, headers: read });
    assert.equal(r.statusCode, 200, r.body);
    return (r.json() as { state: { liveness: { state: string } } }).state.liveness.state;
  };
  /** The current view (no `at`): liveness, and the reason when not observed. */
  const now = async (node: string): Promise<{ state: string; reason?: string }> => {
    const r = await engine.app.inject({ method: 'GET', url: `/v1/nodes/${node}`, headers: read });
    assert.equal(r.statusCode, 200, r.body);
    return (r.json() as { liveness: { state: string; reason?: string } }).liveness;
  };
  return { engine, transport, stop, stateAt, now };
}

/** A node publishing alive every 100 ms straight to the broker (never through the proxy), until the test ends. */
async function beatingNode(defer: Defer, lab: BrokerLab): Promise<string> {
  const node = `cut-${uniqueTag()}`;
  const nodeConn = await connectAmqp({ url: await lab.enroll(node), logger });
  const link = createAmqpNodeLink(nodeConn, { node, logger });
  let beating = true;
  let n = 0;
  const beat = (async () => {
    while (beating) {
      await link.publish('alive', encodeAlive({ node }), `alive-${n++}`).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  defer(async () => {
    beating = false;
    await beat;
    await link.close();
    await nodeConn.close();
  });
  return node;
}

describeOnBroker('observation while the engine is cut off from the broker', () => {
  let lab: BrokerLab;
  let proxy: FaultProxy;
  before(async () => {
    lab = await createBrokerLab('converge-int-brokerlost');
    const u = new URL(lab.engineUrl);
    proxy = await createFaultProxy({ target: { host: u.hostname, port: Number(u.port || 5672) } });
  });
  after(async () => {
    await proxy?.close();
    await lab?.remove();
  });

  for (const c of cuts) {
    test(`${c.name}: not observed during the cut, no silence for a node alive throughout, observed again after`, async (t) => {
      proxy.refuse(false);
      proxy.pass();
      const defer = deferrer(t);
      const store = createMemoryEventStore();
      const { transport, stop, stateAt, now } = await startEngine(defer, proxy.rewrite(lab.engineUrl), store, 'engine-cut');
      const node = await beatingNode(defer, lab);
      const nodeEvents = (): Promise<readonly Recorded[]> => store.readStream(streamOf(node));
      const spans = (): Promise<readonly Recorded[]> => store.readStream(observationStream);
      await until('the node heard', async () => (await nodeEvents()).some((e) => e.type === 'NodeHeard'));

      const cutAt = Date.now();
      c.cut(proxy);
      await until('the engine to notice the loss', () => !transport.connection.isConnected());
      const noticedAt = Date.now();
      // Long enough for the sweep to have judged the node silent, were it judging.
      await until('the cut to outlast the grace three times', () => Date.now() - noticedAt > 3 * graceMs);
      const judgedInCut = (await nodeEvents()).filter((e) => e.type === 'NodeSilent' && ms(e.data.observedAt) > noticedAt);
      assert.deepEqual(judgedInCut, [], 'no silence judged while the engine could hear no node');
      const stopped = (await spans()).find((e) => e.type === 'ObservationStopped');
      assert.ok(stopped?.type === 'ObservationStopped', 'the end of observation recorded');
      assert.equal(stopped.data.why, 'broker-lost');
      assert.ok(ms(stopped.data.at) >= cutAt && ms(stopped.data.at) <= noticedAt, 'at the moment the loss was noticed');
      const during = await now(node);
      assert.equal(during.state, 'not-observed', "the engine's current view says what the record says now");
      assert.match(during.reason ?? '', /broker/);

      c.heal(proxy);
      const resumed = await until(
        'observation to resume',
        async () => (await spans()).find((e) => e.type === 'ObservationStarted' && e.position > stopped.position) ?? null,
        { timeoutMs: 90_000 },
      );
      assert.ok(resumed.type === 'ObservationStarted');
      assert.equal(resumed.data.graceMs, graceMs);
      await until('the node heard again after the resume', async () =>
        (await nodeEvents()).some((e) => e.type === 'NodeHeard' && ms(e.data.at) >= ms(resumed.data.at)),
      );

      // Were the cut noticed late (blackholed, a loaded machine), a silence may be judged before
      // the stop: never inside the span no one observed.
      const silences = (await nodeEvents()).filter((e) => e.type === 'NodeSilent');
      const inGap = silences.filter((e) => ms(e.data.observedAt) > ms(stopped.data.at));
      assert.deepEqual(inGap, [], 'no silence recorded inside the span not observed');
      if (c.name === 'reset and refused') assert.deepEqual(silences, [], 'noticed at once: no silence at all');

      const inside = Math.floor((ms(stopped.data.at) + ms(resumed.data.at)) / 2);
      assert.equal(await stateAt(node, inside), 'not-observed', 'a moment inside the cut');
      assert.equal(await stateAt(node, Date.now()), 'connected', 'heard again since the resume');
      assert.equal((await now(node)).state, 'connected', 'and in the current view');

      // A stop closes its channels on purpose: that is a stop, not a loss.
      await stop();
      const last = (await spans()).at(-1);
      assert.equal(last?.type === 'ObservationStopped' && last.data.why, 'stopped');
    });
  }

  test('a blip: a reset the engine reconnects from at once is recorded as it was, a stop and then a start', async (t) => {
    proxy.refuse(false);
    proxy.pass();
    const defer = deferrer(t);
    const store = createMemoryEventStore();
    const { transport } = await startEngine(defer, proxy.rewrite(lab.engineUrl), store, 'engine-blip');
    const spans = async (): Promise<string[]> =>
      (await store.readStream(observationStream)).map((e) => (e.type === 'ObservationStopped' ? e.data.why : 'started'));
    await until('consuming', () => transport.connection.isConnected());
    const generation = transport.connection.generation();
    assert.ok(proxy.reset() > 0, 'the engine connection reset');
    await until('the span closed and opened again', async () => (await spans()).length === 3, { timeoutMs: 90_000 });
    assert.deepEqual(await spans(), ['started', 'broker-lost', 'started']);
    assert.ok(transport.connection.generation() > generation, 'over a new connection');
  });

  describeOnPostgres('engines sharing a PostgreSQL store', () => {
    test('one engine cut off while another consumes: the moments of the cut read what the other observed', async (t) => {
      proxy.refuse(false);
      proxy.pass();
      const defer = deferrer(t);
      const scratch = scratchSchema('converge_brokerlost');
      defer(() => scratch.drop());
      // One store client each, as two serve processes have.
      const storeA = createPostgresEventStore(scratch.url);
      const a = await startEngine(defer, proxy.rewrite(lab.engineUrl), storeA, 'engine-a');
      const storeB = createPostgresEventStore(scratch.url);
      const b = await startEngine(defer, lab.engineUrl, storeB, 'engine-b');
      const node = await beatingNode(defer, lab);
      const spans = (): Promise<readonly Recorded[]> => storeB.readStream(observationStream);
      // mesh.alive hands its messages to both engines in turn.
      const received = (e: typeof a): number => e.engine.ingest?.stats().received ?? 0;
      await until('both engines to hear the node', () => received(a) > 0 && received(b) > 0);

      proxy.refuse(true);
      proxy.reset();
      await until('engine A to notice the loss', () => !a.transport.connection.isConnected());
      const noticedAt = Date.now();
      await until('the cut to outlast the grace three times', () => Date.now() - noticedAt > 3 * graceMs);
      const stopped = (await spans()).find((e) => e.type === 'ObservationStopped');
      assert.ok(stopped?.type === 'ObservationStopped', "A's end of observation recorded");
      assert.deepEqual([stopped.data.engine, stopped.data.why], ['engine-a', 'broker-lost']);
      const inCut = Math.floor((ms(stopped.data.at) + Date.now()) / 2);
      assert.equal(await b.stateAt(node, inCut), 'connected', 'B observed the cut and heard the node throughout');
      assert.equal((await a.now(node)).state, 'connected', "A's current view follows what B records");

      proxy.refuse(false);
      await until(
        'A to observe again',
        async () =>
          (await spans()).some((e) => e.type === 'ObservationStarted' && e.data.engine === 'engine-a' && e.position > stopped.position),
        { timeoutMs: 90_000 },
      );
      const silences = (await storeB.readStream(streamOf(node))).filter((e) => e.type === 'NodeSilent');
      assert.deepEqual(silences, [], 'neither engine recorded a silence');
      assert.equal((await spans()).filter((e) => e.type === 'ObservationStopped').length, 1, "B's span stayed open; A's closed once");
      assert.equal(await a.stateAt(node, inCut), 'connected', "A's view of the record agrees");
    });
  });
});
