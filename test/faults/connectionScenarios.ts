import { join } from 'node:path';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { defaultBroker } from '../support/broker.ts';
import { sleep, until } from '../support/until.ts';
import { startEngine } from './faultScenario.ts';
import type { Scenario } from './faultScenario.ts';
import { startLoad, PER_NODE, PACE_MS, withNodes } from './faultNodes.ts';
import { timeToStore, recoveryFrom, settleAll, tally } from './faultTally.ts';

// Fault scenarios on the engine's broker connection: none (the baseline), TCP resets, a blackhole,
// and the broker closing every connection.

export const baseline: Scenario = {
  name: 'baseline',
  faults: 'none',
  run: (lab) =>
    withNodes(lab, 'base', 3, async (nodes) => {
      const store = createSqliteEventStore(join(lab.dir, 'baseline.db'));
      const engine = await startEngine(lab.engineUrl, store);
      try {
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        await load.done;
        const recover = await timeToStore(() => store, load.confirmed());
        return await tally(baseline, store, load, recover);
      } finally {
        await engine.stop();
        await store.close();
      }
    }),
};

export const proxyReset: Scenario = {
  name: 'proxy reset',
  faults: 'engine↔broker TCP reset (RST) 3× under load',
  run: (lab) =>
    withNodes(lab, 'rst', 3, async (nodes) => {
      const proxy = await createFaultProxy({
        target: { host: new URL(defaultBroker.amqpUrl).hostname, port: Number(new URL(defaultBroker.amqpUrl).port || 5672) },
      });
      const store = createSqliteEventStore(join(lab.dir, 'reset.db'));
      const engine = await startEngine(proxy.rewrite(lab.engineUrl), store);
      try {
        // Load runs until recovery is measured: recovery needs a report confirmed after the last
        // reset, and a fixed load may be spent by then on a slow machine.
        const load = startLoad(nodes, Infinity, PACE_MS);
        let resets = 0;
        for (let i = 0; i < 3; i++) {
          await until('some load to flow', () => load.confirmed().size >= ((i + 1) * PER_NODE * nodes.length) / 8, 60_000);
          await until('the engine to reconnect', () => engine.connection.isConnected() && engine.connection.generation() === i + 1, 30_000);
          resets += proxy.reset();
        }
        const recover = await recoveryFrom(() => store, load, true);
        await until('the planned load to be confirmed', () => load.confirmed().size >= PER_NODE * nodes.length);
        load.finish();
        await load.done;
        await settleAll(() => store, load);
        await until('the engine to reconnect after the last reset', () => engine.connection.generation() >= 4, 30_000).catch(
          () => undefined,
        );
        const reconnected = engine.connection.generation() - 1;
        return await tally(proxyReset, store, load, recover, {
          notes: [`${resets} connection(s) reset; engine reconnected ${reconnected}×`],
          checks: { engineReconnected: reconnected >= 3 },
        });
      } finally {
        await engine.stop();
        await store.close();
        await proxy.close();
      }
    }),
};

export const proxyBlackhole: Scenario = {
  name: 'proxy blackhole',
  faults: 'engine↔broker blackholed 5 s (no FIN/RST; heartbeat 1 s) under load',
  run: (lab) =>
    withNodes(lab, 'bh', 3, async (nodes) => {
      const u = new URL(defaultBroker.amqpUrl);
      const proxy = await createFaultProxy({ target: { host: u.hostname, port: Number(u.port || 5672) } });
      const store = createSqliteEventStore(join(lab.dir, 'blackhole.db'));
      const engine = await startEngine(proxy.rewrite(lab.engineUrl), store, 1);
      try {
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        await until('some load to flow', () => load.confirmed().size >= (PER_NODE * nodes.length) / 4);
        const gen = engine.connection.generation();
        proxy.blackhole();
        const noticed = await until('the engine to notice the dead link', () => !engine.connection.isConnected(), 15_000).then(
          () => true,
          () => false,
        );
        await sleep(5_000);
        proxy.pass();
        const recovering = recoveryFrom(() => store, load, false);
        await load.done;
        const recover = await recovering;
        await settleAll(() => store, load);
        const reconnected = engine.connection.generation() - gen;
        return await tally(proxyBlackhole, store, load, recover, {
          notes: [
            `engine ${noticed ? 'noticed the blackhole through heartbeats' : 'did NOT notice the blackhole'}; reconnected ${reconnected}×`,
          ],
          checks: { engineNoticedBlackhole: noticed, engineReconnected: reconnected >= 1 },
        });
      } finally {
        await engine.stop();
        await store.close();
        await proxy.close();
      }
    }),
};

// `rabbitmqctl close_all_connections` takes 2–5 s on a busy machine (it starts an Erlang VM before
// it closes anything), so the scenario takes that long too, always: a fixed load could finish
// before the last close, leaving no report to prove recovery with.
const CLOSE_DELAY_MS = Number(process.env['CONVERGE_FAULT_CLOSE_DELAY_MS'] ?? 2_000);

export const closeAllConnections: Scenario = {
  name: 'broker closes all connections',
  faults: 'rabbitmqctl close_all_connections for the vhost (engine and nodes) 3× under load',
  run: (lab) =>
    withNodes(lab, 'cac', 3, async (nodes) => {
      const store = createSqliteEventStore(join(lab.dir, 'closeall.db'));
      const engine = await startEngine(lab.engineUrl, store);
      try {
        // Load runs until recovery is measured (as in the SIGKILL scenario): recovery needs a report
        // confirmed after the last close, and the closes take seconds.
        const load = startLoad(nodes, Infinity, PACE_MS);
        let closed = 0;
        for (let i = 0; i < 3; i++) {
          await until('some load to flow', () => load.confirmed().size >= ((i + 1) * PER_NODE * nodes.length) / 8);
          // Each close must meet a fresh engine connection, not the one the last close just killed.
          await until('the engine to reconnect', () => engine.connection.isConnected() && engine.connection.generation() === i + 1, 30_000);
          await sleep(CLOSE_DELAY_MS);
          closed += await lab.closeAllConnections();
        }
        const recover = await recoveryFrom(() => store, load, true);
        await until('the planned load to be confirmed', () => load.confirmed().size >= PER_NODE * nodes.length);
        load.finish();
        await load.done;
        await settleAll(() => store, load);
        const reconnectedAfterLast = await until(
          'the engine to reconnect after the last close',
          () => engine.connection.generation() >= 4,
          30_000,
        ).then(
          () => true,
          () => false,
        );
        return await tally(closeAllConnections, store, load, recover, {
          notes: [`${closed} connection(s) closed by the broker`],
          checks: { everyConnectionClosed: closed >= 3 * (nodes.length + 1), engineReconnected: reconnectedAfterLast },
        });
      } finally {
        await engine.stop();
        await store.close();
      }
    }),
};
