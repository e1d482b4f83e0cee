import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { defaultLeaseTtlMs } from '../../src/store/postgres/lease.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { meshTopology, nodeTopology } from '../../src/transport/topology.ts';
import { defaultBroker, uniqueTag } from '../support/broker.ts';
import { recordingLink } from '../support/faults/simulatedFleet.ts';
import type { Receipt } from '../support/faults/simulatedFleet.ts';
import { logger } from '../support/logger.ts';
import { scratchSchema } from '../support/postgres.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { sleep, until } from '../support/until.ts';
import type { FaultLab, Scenario, ScenarioResult } from './scenarios.ts';

// End to end: two `converge serve` on one PostgreSQL store; A holds the relay lease and is frozen
// with SIGSTOP. Its session lives on (a frozen process keeps its sockets), so only the lease's own
// bound (src/store/postgres/lease.ts: a beat that stops moving for ttl) lets B take over. B must
// take the lease within that bound and deliver what is POSTed meanwhile; A, thawed with SIGCONT,
// must publish nothing more: a declaration reaches its node twice only if it was stored before
// the freeze (the batch A had in flight, the at-least-once window of docs/operations.md).

export const frozenLeaderFaults =
  'two `converge serve` on one PostgreSQL store; the relay-lease holder frozen with SIGSTOP while declarations are POSTed to the other, then thawed with SIGCONT';

/** The bound B is given to take over: the lease's ttl, a standby's read interval and a margin for two busy cores. */
const takeoverBoundMs = defaultLeaseTtlMs + 10_000;

/** converge_relay_published_total from an engine's /metrics (0 before the series appears). */
async function relayPublished(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => /^converge_relay_published_total /.test(l));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

export async function runFrozenLeader(lab: FaultLab): Promise<ScenarioResult> {
  const scratch = scratchSchema('converge_frozen');
  const key = generateSigningKey();
  const keyPath = join(lab.dir, 'signing.pem');
  writeFileSync(keyPath, signingKeyToPem(key), { mode: 0o600 });
  const token = `frozen-${uniqueTag()}${uniqueTag()}`;
  const node = `frozen-${uniqueTag()}`;
  const env = (name: string): Record<string, string> => ({
    CONVERGE_STORE: scratch.url,
    CONVERGE_AMQP_URL: lab.engineUrl,
    CONVERGE_MANAGEMENT_URL: defaultBroker.managementUrl,
    CONVERGE_SIGNING_KEY: keyPath,
    CONVERGE_API_TOKENS: `${token}:read,send`,
    CONVERGE_SNAPSHOT: join(lab.dir, `${name}.snapshot.json`),
    CONVERGE_LOG_LEVEL: 'info',
  });
  const engines: ServeProcess[] = [];
  let conn: AmqpConnection | null = null;
  let sim: SimulatedNode | null = null;
  try {
    const mesh = meshTopology();
    const inbox = nodeTopology(node);
    await (
      await connectAmqp({
        url: lab.engineUrl,
        logger,
        topology: { exchanges: mesh.exchanges, queues: [...mesh.queues, ...inbox.queues], bindings: [...mesh.bindings, ...inbox.bindings] },
      })
    ).close();
    const a = startServe(['serve', '--port', '0'], env('a'));
    engines.push(a);
    const urlA = await a.url;
    await until('A to take the relay lease', () => a.logged(/relay lease taken/), 30_000);
    const b = startServe(['serve', '--port', '0'], env('b'));
    engines.push(b);
    const urlB = await b.url;

    const receipts: Receipt[] = [];
    conn = await connectAmqp({ url: await lab.enroll(node), logger, connectionName: `frozen-${node}`, heartbeatSeconds: 2 });
    sim = createSimulatedNode({ link: recordingLink(createAmqpNodeLink(conn, { node, logger }), receipts), verifyingKey: key, logger });
    await sim.start();

    /** Digests POSTed (through B), with when the POST was answered. */
    const posted: { digest: string; at: number }[] = [];
    let i = 0;
    const declare = async (): Promise<string> => {
      const res = await fetch(`${urlB}/v1/nodes/${node}/declarations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ resources: [{ id: 'web', image: `web:${++i}` }] }),
      });
      if (res.status !== 202) throw new Error(`POST answered ${res.status}: ${await res.text()}`);
      const { digest } = (await res.json()) as { digest: string };
      posted.push({ digest, at: Date.now() });
      return digest;
    };
    const received = (digest: string): number => receipts.filter((r) => r.digest === digest).length;

    const first = await declare();
    await until('A to deliver a declaration', () => received(first) > 0, 30_000);

    // Nothing is in flight at A now: whatever it counts as published after the thaw, it published after it.
    const publishedBefore = await relayPublished(urlA);
    a.child.kill('SIGSTOP');
    const stopAt = Date.now();
    // Declarations keep coming while A is frozen; the first delivered one marks the takeover.
    let frozenPosts = true;
    const poster = (async () => {
      while (frozenPosts) {
        await declare().catch(() => undefined);
        await sleep(250);
      }
    })();
    const takenAt = await until('B to take the relay lease', () => b.logged(/relay lease taken/, stopAt), {
      timeoutMs: takeoverBoundMs,
      everyMs: 20,
    }).then(
      (line) => line.at,
      () => null,
    );
    const deliveredAt = await until(
      'a declaration POSTed during the freeze to reach its node',
      () => posted.find((p) => p.at > stopAt && received(p.digest) > 0),
      { timeoutMs: takeoverBoundMs + 10_000, everyMs: 20 },
    ).then(
      (p) => Math.min(...receipts.filter((r) => r.digest === p.digest).map((r) => r.at)),
      () => null,
    );
    frozenPosts = false;
    await poster;

    a.child.kill('SIGCONT');
    const contAt = Date.now();
    const lostLogged = await until('A to say it lost the relay lease', () => a.logged(/relay lease lost/, contAt), 30_000).then(
      () => true,
      () => false,
    );
    for (let k = 0; k < 4; k++) await declare();
    // A node's inbox keeps only its latest declaration (x-max-length 1, drop-head): a backlog the
    // standby publishes at once may replace one another there, so what must arrive is the latest.
    const latest = posted[posted.length - 1]!.digest;
    const everyReceived = await until('the latest declaration POSTed to reach its node', () => received(latest) > 0, 30_000).then(
      () => true,
      () => false,
    );
    // A's relay stopped when it said so: what it counts now is all it will ever have published.
    const publishedByA = (await relayPublished(urlA)) - publishedBefore;
    const twice = posted.filter((p) => received(p.digest) > 1);
    const twiceOutsideWindow = twice.filter((p) => p.at >= stopAt);
    return {
      scenario: 'frozen relay leader (SIGSTOP)',
      faults: frozenLeaderFaults,
      sent: posted.length,
      confirmed: posted.filter((p) => received(p.digest) > 0).length,
      stored: posted.length,
      // Only the latest declaration is owed to the node (its inbox keeps one); earlier ones replaced there are not lost.
      lost: everyReceived ? 0 : 1,
      duplicated: twice.length,
      hostileTried: 0,
      hostileAppended: 0,
      recoverMs: deliveredAt === null ? null : deliveredAt - stopAt,
      notes: [
        `relay lease taken by B ${takenAt === null ? 'never' : `${takenAt - stopAt} ms`} after the SIGSTOP (ttl ${defaultLeaseTtlMs} ms)`,
        `first delivery during the freeze ${deliveredAt === null ? 'never' : `${deliveredAt - stopAt} ms`} after it`,
        `frozen ${contAt - stopAt} ms; ${receipts.length} receipts for ${posted.length} declarations; A published ${publishedByA} after the freeze`,
        `${twice.length} received twice, ${twiceOutsideWindow.length} of them POSTed after the freeze began`,
      ],
      checks: {
        'B took the lease within the bound': takenAt !== null,
        'a declaration POSTed during the freeze was delivered': deliveredAt !== null,
        'A said it lost the lease once thawed': lostLogged,
        'the latest declaration reached its node': everyReceived,
        'none POSTed after the freeze began was delivered twice': twiceOutsideWindow.length === 0,
        'A published nothing once thawed': publishedByA === 0,
      },
    };
  } finally {
    for (const e of engines) {
      e.child.kill('SIGCONT');
      await e.kill();
    }
    await sim?.stop().catch(() => undefined);
    await conn?.close().catch(() => undefined);
    await scratch.drop();
  }
}

export const frozenLeader: Scenario = { name: 'frozen relay leader', faults: frozenLeaderFaults, run: runFrozenLeader };
