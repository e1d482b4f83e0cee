import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { meshTopology } from '../../src/transport/topology.ts';
import { createBrokerLab, describeOnBroker, uniqueTag } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import type { BrokerLab } from '../support/broker.ts';

// docs/design.md §6: engine instances are active/passive through single-active-consumer on
// mesh.reports. Two engine processes on one SQLite file: only one consumes; SIGKILL it
// mid-stream and the other takes over with nothing lost or doubled.

type Stats = { pid: number; received: number; acked: number };
type EngineProc = { child: ChildProcess; last: Stats | null; exited: Promise<void> };

function startEngine(url: string, path: string): EngineProc {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/int/fixtures/ingestProcess.ts', url, path], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const e: EngineProc = { child, last: null, exited: new Promise((r) => child.once('exit', () => r())) };
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      e.last = JSON.parse(line) as Stats;
    } catch {
      // not a stats line
    }
  });
  return e;
}

const total = 3_000;

describeOnBroker('two engine processes on one broker', () => {
  const tag = uniqueTag();
  let lab: BrokerLab;
  let dir: string;
  const engines: EngineProc[] = [];
  before(async () => {
    lab = await createBrokerLab('converge-int-sac');
    dir = mkdtempSync(join(tmpdir(), 'converge-sac-'));
  });
  after(async () => {
    for (const e of engines) e.child.kill('SIGKILL');
    await lab?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test('only one consumes mesh.reports; when it is SIGKILLed the other takes over and nothing is lost or doubled', async () => {
    const path = join(dir, 'events.db');
    // Topology first, so the node accounts can publish before either engine is up.
    await (await connectAmqp({ url: lab.engineUrl, logger, topology: meshTopology() })).close();
    const a = startEngine(lab.engineUrl, path);
    engines.push(a);
    await until('engine A consuming', () => a.last !== null, 60_000);
    const b = startEngine(lab.engineUrl, path);
    engines.push(b);
    await until('engine B consuming', () => b.last !== null, 60_000);

    const key = generateSigningKey();
    const conns: AmqpConnection[] = [];
    const sims: SimulatedNode[] = [];
    for (const n of ['s0', 's1']) {
      const node = `${tag}-${n}`;
      const conn = await connectAmqp({ url: await lab.enroll(node), logger });
      conns.push(conn);
      sims.push(createSimulatedNode({ link: createAmqpNodeLink(conn, { node, logger }), verifyingKey: key, logger }));
    }
    try {
      const publishing = Promise.all(
        sims.map(async (sim) => {
          let left = total / sims.length;
          await Promise.all(
            Array.from({ length: 20 }, async () => {
              while (left > 0) {
                left--;
                await sim.report({ applied: ['web'] });
              }
            }),
          );
        }),
      );
      const active = await until('one engine active', () => [a, b].find((e) => (e.last?.acked ?? 0) >= 300));
      const passive = active === a ? b : a;
      assert.equal(passive.last?.received, 0, 'the passive engine received no report while the active one lived');
      active.child.kill('SIGKILL');
      await active.exited;
      await publishing;
      const want = new Set(sims.flatMap((s) => s.confirmedReports().map((r) => r.messageId)));
      assert.equal(want.size, total);
      await until('the survivor took over', () => (passive.last?.received ?? 0) > 0, 60_000);

      const store = createSqliteEventStore(path);
      try {
        const counts = await until(
          'every confirmed report stored',
          async () => {
            const seen = new Map<string, number>();
            for await (const batch of store.readAll()) {
              for (const e of batch)
                if (e.type === 'ReportReceived')
                  seen.set(e.data.transport.messageId ?? '', (seen.get(e.data.transport.messageId ?? '') ?? 0) + 1);
            }
            return [...want].every((id) => seen.has(id)) ? seen : null;
          },
          60_000,
        );
        assert.deepEqual(
          [...counts].filter(([, n]) => n !== 1),
          [],
          'no report stored twice',
        );
        assert.equal(counts.size, total);
      } finally {
        await store.close();
      }
    } finally {
      for (const s of sims) await s.stop();
      for (const c of conns) await c.close();
      for (const e of engines) {
        if (e.child.exitCode !== null || e.child.signalCode !== null) continue;
        e.child.kill('SIGTERM');
        await e.exited;
      }
    }
  });
});
