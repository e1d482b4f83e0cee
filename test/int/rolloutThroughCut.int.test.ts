import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import type { WaveCompletedData } from '../../src/core/events/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import { createBrokerLab, describeOnBroker, uniqueTag } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import type { FaultProxy } from '../support/faults/faultProxy.ts';
import { testKey } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// docs/design.md §8 "Timeouts while not observed": a node that applies its declaration and reports while the
// engine's own link to the broker is cut is not a timeout. Its report waits on the broker; the
// wave's timeout is held through the cut, and once the engine consumes again the report arrives
// and the wave completes, done.

const graceMs = 1_500;
// Long enough that the cut is in place before it falls due, on a loaded machine too.
const waveTimeoutMs = 4_000;
const operator = { authorization: 'Bearer operator-token', 'content-type': 'application/json' };

describeOnBroker('a rollout while the engine is cut off from the broker', () => {
  let lab: BrokerLab;
  let proxy: FaultProxy;
  before(async () => {
    lab = await createBrokerLab('converge-int-rolloutcut');
    const u = new URL(lab.engineUrl);
    proxy = await createFaultProxy({ target: { host: u.hostname, port: Number(u.port || 5672) } });
  });
  after(async () => {
    await proxy?.close();
    await lab?.remove();
  });

  test('a node reports during a cut longer than the wave timeout: after the link returns the wave completes, done', async (t) => {
    const store = createMemoryEventStore();
    const config = loadConfig(
      { flags: {}, env: {} },
      {
        store: 'memory:',
        port: '0',
        logLevel: 'silent',
        apiTokens: 'operator-token:read,send',
        graceMs: String(graceMs),
        lastSeenFlushMs: '200',
        engineId: 'engine-cut',
      },
    );
    const transport = await createAmqpTransport({ url: proxy.rewrite(lab.engineUrl), logger, heartbeatSeconds: 1 });
    const engine = createServer({
      config,
      logger,
      store,
      key: testKey,
      dashboardDir: null,
      transport: { ingestSource: transport.ingestSource(), publisher: transport.declarationPublisher() },
    });
    // The node talks to the broker itself, never through the proxy: it is the engine that is cut off.
    const node = `cut-${uniqueTag()}`;
    const nodeConn = await connectAmqp({ url: await lab.enroll(node), logger });
    let received = false;
    let release = (): void => {};
    const cutInPlace = new Promise<void>((r) => (release = r));
    const sim = createSimulatedNode({
      link: createAmqpNodeLink(nodeConn, { node, logger }),
      verifyingKey: testKey,
      logger,
      aliveEveryMs: 100,
      // It has its declaration before the cut, and applies and reports during it.
      beforeApply: async () => {
        received = true;
        await cutInPlace;
      },
    });
    t.after(async () => {
      release();
      proxy.refuse(false);
      proxy.pass();
      await sim.stop();
      await nodeConn.close();
      await engine.stop();
      await transport.close();
      await store.close();
    });
    await engine.start();
    await sim.start();

    const started = await engine.app.inject({
      method: 'POST',
      url: '/v1/rollouts',
      headers: operator,
      payload: JSON.stringify({
        rollout: 'cut',
        resources: [{ id: 'web', image: 'nginx:1.27' }],
        selection: { kind: 'nodes', nodes: [node] },
        waves: '100%',
        maxFailures: '0',
        waveTimeoutMs,
      }),
    });
    assert.equal(started.statusCode, 202, started.body);
    await until('the node to receive its declaration', () => received);

    proxy.refuse(true);
    proxy.reset();
    await until('the engine to notice the loss', () => engine.ingest?.brokerLost() === true);
    const noticedAt = Date.now();
    release();
    await until('the report confirmed by the broker', () => sim.confirmedReports().length > 0);
    // The cut outlasts the wave's timeout and a grace more; whole rounds of decisions run in it.
    await until('the cut to outlast the timeout and a grace', () => Date.now() - noticedAt > waveTimeoutMs + graceMs);
    for (let i = 0; i < 3; i++) await engine.rollouts!.nextRound();
    const ended = (await store.readStream('rollout-cut')).filter((e) => e.type === 'RolloutHalted' || e.type === 'WaveCompleted');
    assert.deepEqual(ended, [], 'nothing decided while the engine could hear no report');

    proxy.refuse(false);
    const completed = await until(
      'the wave to complete',
      async () => (await store.readStream('rollout-cut')).find((e) => e.type === 'WaveCompleted' || e.type === 'RolloutHalted') ?? null,
      { timeoutMs: 90_000 },
    );
    assert.equal(completed.type, 'WaveCompleted', JSON.stringify(completed.data));
    const data = completed.data as WaveCompletedData;
    assert.deepEqual([data.done, data.failed], [1, 0]);
    await until('the rollout to complete', async () => (await store.readStream('rollout-cut')).some((e) => e.type === 'RolloutCompleted'));
  });
});
