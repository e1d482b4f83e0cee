import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { defaultBroker, uniqueTag } from '../support/broker.ts';
import { declareMesh, enrollSimulatedNodes, startReportLoad } from '../support/faults/simulatedFleet.ts';
import type { Accepted, Receipt } from '../support/faults/simulatedFleet.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { sleep, until } from '../support/until.ts';
import type { FaultLab, Load } from './scenarios.ts';

// A fleet for the PostgreSQL fault scenarios (./postgresFailoverScenario.ts): one or two
// `converge serve` (the built CLI) on one store URL and one broker vhost, simulated nodes
// (src/simulation/) reporting under load with each report retried until confirmed, and an
// operator POSTing declarations to the engines' APIs in turn, recording what each answered.

export type PgFleet = Readonly<{
  engines: readonly { name: string; serve: ServeProcess; url: string }[];
  load: Load;
  /** When each report was confirmed, by message id. */
  confirmedAt: ReadonlyMap<string, number>;
  receipts: readonly Receipt[];
  accepted: readonly Accepted[];
  /** POSTs not answered 202, as `<engine>: <status or error>`, with when. */
  refused: readonly { at: number; what: string }[];
  received: (digest: string) => number;
  stopDeclaring: () => Promise<void>;
  close: () => Promise<void>;
}>;

export async function startPgFleet(
  lab: FaultLab,
  o: Readonly<{ storeUrl: string; engines: 1 | 2; nodes: number; paceMs: number; declareEveryMs: number }>,
): Promise<PgFleet> {
  const key = generateSigningKey();
  const keyPath = join(lab.dir, 'signing.pem');
  writeFileSync(keyPath, signingKeyToPem(key), { mode: 0o600 });
  const token = `pg-fault-${uniqueTag()}${uniqueTag()}`;
  const tag = uniqueTag();
  const ids = Array.from({ length: o.nodes }, (_, i) => `pgf-${tag}-${i}`);
  const env = (name: string): Record<string, string> => ({
    CONVERGE_STORE: o.storeUrl,
    CONVERGE_AMQP_URL: lab.engineUrl,
    CONVERGE_MANAGEMENT_URL: defaultBroker.managementUrl,
    CONVERGE_SIGNING_KEY: keyPath,
    CONVERGE_API_TOKENS: `${token}:read,send`,
    CONVERGE_SNAPSHOT: join(lab.dir, `${name}.snapshot.json`),
    CONVERGE_LOG_LEVEL: 'info',
  });

  const engines: { name: string; serve: ServeProcess; url: string }[] = [];
  const conns: AmqpConnection[] = [];
  const sims: SimulatedNode[] = [];
  let stopLoad = (): void => undefined;
  let declaring = true;
  let declarer: Promise<void> = Promise.resolve();
  const close = async (): Promise<void> => {
    stopLoad();
    declaring = false;
    await declarer;
    for (const s of sims) await s.stop().catch(() => undefined);
    for (const c of conns) await c.close().catch(() => undefined);
    for (const e of engines) await e.serve.kill();
  };
  try {
    await declareMesh(lab.engineUrl, ids);

    // A first, so it holds mesh.reports and the relay lease; then B, standing by.
    for (const name of o.engines === 1 ? ['A'] : ['A', 'B']) {
      const serve = startServe(['serve', '--port', '0'], env(name));
      engines.push({ name, serve, url: '' });
      engines[engines.length - 1]!.url = await serve.url;
      if (name === 'A') await until('A to take the relay lease', () => serve.logged(/relay lease taken/), 60_000);
    }

    const receipts: Receipt[] = [];
    await enrollSimulatedNodes({ enroll: (id) => lab.enroll(id), ids, key, tag: 'pg-fault', receipts, sims, conns });
    const load = startReportLoad(sims, o.paceMs);
    stopLoad = load.stop;

    const accepted: Accepted[] = [];
    const refused: { at: number; what: string }[] = [];
    declarer = (async () => {
      for (let i = 0; declaring; i++) {
        const e = engines[i % engines.length]!;
        const node = ids[i % ids.length]!;
        const at = Date.now();
        try {
          const res = await fetch(`${e.url}/v1/nodes/${node}/declarations`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ resources: [{ id: 'web', image: `web:${i}` }] }),
            signal: AbortSignal.timeout(30_000),
          });
          if (res.status === 202)
            accepted.push({ digest: ((await res.json()) as { digest: string }).digest, node, via: e.name, at, answeredAt: Date.now() });
          else
            refused.push({
              at,
              what: `${e.name}: ${res.status} ${((await res.json().catch(() => ({}))) as { code?: string }).code ?? ''}`,
            });
        } catch (err) {
          refused.push({ at, what: `${e.name}: ${(err as Error).message}` });
        }
        await sleep(o.declareEveryMs);
      }
    })();

    return {
      engines,
      load,
      confirmedAt: load.confirmedAt(),
      receipts,
      accepted,
      refused,
      received: (digest) => receipts.filter((r) => r.digest === digest).length,
      stopDeclaring: async () => {
        declaring = false;
        await declarer;
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
