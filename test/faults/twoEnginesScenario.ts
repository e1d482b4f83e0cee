import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { defaultBroker, uniqueTag } from '../support/broker.ts';
import { scratchSchema } from '../support/postgres.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { sleep, until } from '../support/until.ts';
import { tally } from './scenarios.ts';
import type { FaultLab, Scenario, ScenarioResult } from './scenarios.ts';
import { declareMesh, enrollSimulatedNodes, startReportLoad } from '../support/faults/simulatedFleet.ts';
import type { Accepted, Receipt } from '../support/faults/simulatedFleet.ts';

// End to end: two `converge serve` processes (the built CLI) on one PostgreSQL store
// (a scratch schema) and one broker (a scratch vhost). A starts first, so it is the single active
// consumer of mesh.reports and takes the relay lease; B stands by. Simulated nodes (src/simulation/)
// report under load while declarations are POSTed through both APIs; A is SIGKILLed. B must take
// over ingest (the broker hands it the queue) and the relay (A's lease names a backend the server
// ended with its session); A is then restarted and must stand by. At the end: every confirmed report
// stored exactly once, every accepted declaration received by its node, a declaration received
// twice only inside the at-least-once window (the batch A had in flight), both APIs answering the
// same states, and `converge replay --verify` agreeing with each engine's snapshot.
//
// Takeover time is measured, never asserted: from the SIGKILL until every report confirmed before
// it is stored and one confirmed after it is stored (ingest), and until B says it took the relay
// lease (relay).

// Twelve nodes, each reporting at most every 50 ms: a few hundred reports a second in all. (Four nodes
// reporting every 5 ms made a third of the POSTs fail with 409: the sender's five attempts each lost
// to the node's own next report.)
const NODES = 12;
const PACE_MS = 50;
const DECLARE_EVERY_MS = 120;
/** The relay's batch (src/engine/relay.ts): at most this many declarations are in flight when A dies. */
const RELAY_BATCH = 100;

export const twoEnginesFaults =
  'two `converge serve` on one PostgreSQL store and one broker; the active one (ingest + relay lease) SIGKILLed under report load and declarations POSTed to both, then restarted';

/** A counter from /metrics, 0 when its series has not appeared yet. */
async function counter(base: string, series: RegExp): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => series.test(l));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}
const reportsAppended = (base: string): Promise<number> => counter(base, /^converge_events_appended_total\{type="ReportReceived"\} /);
const relayPublished = (base: string): Promise<number> => counter(base, /^converge_relay_published_total /);

/** Every ReportReceived's message id and how often it is stored, read incrementally from the store. */
function storedReports(store: EventStore): { counts: Map<string, number>; refresh: () => Promise<Map<string, number>> } {
  const counts = new Map<string, number>();
  let after: bigint | null = null;
  return {
    counts,
    refresh: async () => {
      for await (const batch of store.readAll(after === null ? {} : { after })) {
        for (const e of batch) {
          after = e.position;
          if (e.type !== 'ReportReceived') continue;
          const id = e.data.transport.messageId ?? `(no id)/${e.id}`;
          counts.set(id, (counts.get(id) ?? 0) + 1);
        }
      }
      return counts;
    },
  };
}

export async function runTwoEngines(lab: FaultLab): Promise<ScenarioResult> {
  const scratch = scratchSchema('converge_two');
  const key = generateSigningKey();
  const keyPath = join(lab.dir, 'signing.pem');
  writeFileSync(keyPath, signingKeyToPem(key), { mode: 0o600 });
  const token = `two-engines-${uniqueTag()}${uniqueTag()}`;
  const auth = { authorization: `Bearer ${token}` };
  const tag = uniqueTag();
  const ids = Array.from({ length: NODES }, (_, i) => `two-${tag}-${i}`);

  const env = (name: string): Record<string, string> => ({
    CONVERGE_STORE: scratch.url,
    CONVERGE_AMQP_URL: lab.engineUrl,
    CONVERGE_MANAGEMENT_URL: defaultBroker.managementUrl,
    CONVERGE_SIGNING_KEY: keyPath,
    CONVERGE_API_TOKENS: `${token}:read,send`,
    CONVERGE_SNAPSHOT: join(lab.dir, `${name}.snapshot.json`),
    CONVERGE_LOG_LEVEL: 'info',
  });
  const serve = (name: string): ServeProcess => startServe(['serve', '--port', '0'], env(name));

  const engines: ServeProcess[] = [];
  const conns: AmqpConnection[] = [];
  const sims: SimulatedNode[] = [];
  const reader = createPostgresEventStore(scratch.url);
  let stopLoad = (): void => undefined;
  try {
    // The topology and the nodes' inboxes first, so nodes consume and publish before any engine is up.
    await declareMesh(lab.engineUrl, ids);

    // A first: it becomes mesh.reports' active consumer and takes the relay lease; then B.
    const a = serve('a');
    engines.push(a);
    const urlA = await a.url;
    await until('A to take the relay lease', () => a.logged(/relay lease taken/), 30_000);
    const b = serve('b');
    engines.push(b);
    const urlB = await b.url;

    const receipts: Receipt[] = [];
    await enrollSimulatedNodes({ enroll: (id) => lab.enroll(id), ids, key, tag: 'two-engines', receipts, sims, conns });

    // Report load: each node reports one after another, each report retried until confirmed.
    const load = startReportLoad(sims, PACE_MS);
    stopLoad = load.stop;

    // Declarations through the APIs in turn, one at a time (each to the next node).
    const accepted: Accepted[] = [];
    /** POSTs not answered 202: unanswered (the engine was killed under them), 409 (the stream kept moving), other. */
    const unanswered: string[] = [];
    const conflicts: string[] = [];
    const otherRefusals: string[] = [];
    let apis: { name: string; url: string }[] = [
      { name: 'A', url: urlA },
      { name: 'B', url: urlB },
    ];
    let declaring = true;
    const declarer = (async () => {
      for (let i = 0; declaring; i++) {
        const api = apis[i % apis.length]!;
        const node = ids[i % ids.length]!;
        const at = Date.now();
        try {
          const res = await fetch(`${api.url}/v1/nodes/${node}/declarations`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ resources: [{ id: 'web', image: `web:${i}` }] }),
          });
          if (res.status === 202)
            accepted.push({ digest: ((await res.json()) as { digest: string }).digest, node, via: api.name, at, answeredAt: Date.now() });
          else (res.status === 409 ? conflicts : otherRefusals).push(`${api.name}: ${res.status} ${await res.text()}`);
        } catch (e) {
          // A POST to the engine being killed may go unanswered: recorded or not, it is not counted.
          unanswered.push(`${api.name}: ${(e as Error).message}`);
        }
        await sleep(DECLARE_EVERY_MS);
      }
    })();
    const received = (digest: string): number => receipts.filter((r) => r.digest === digest).length;

    await until(
      'load to flow and declarations to reach their nodes through A',
      () => load.confirmed().size >= 600 && receipts.length >= 6,
      60_000,
    );
    const beforeKill = {
      aReports: await reportsAppended(urlA),
      aPublished: await relayPublished(urlA),
      bReports: await reportsAppended(urlB),
      bPublished: await relayPublished(urlB),
    };

    // SIGKILL the active engine; from now on declarations go to B only.
    apis = [{ name: 'B', url: urlB }];
    const confirmedBefore = load.confirmed();
    const killAt = Date.now();
    await a.kill();
    const stored = storedReports(reader);
    const ingestTakeover = until(
      'B to take over ingest',
      async () => {
        const counts = await stored.refresh();
        for (const id of confirmedBefore) if (!counts.has(id)) return false;
        for (const [id, at] of load.confirmedAt()) if (at > killAt && counts.has(id)) return true;
        return false;
      },
      { timeoutMs: 60_000, everyMs: 25 },
    ).then(
      () => Date.now() - killAt,
      () => null,
    );
    // The relay is back once B holds the lease (its log line, as it arrives); a declaration POSTed
    // to B after the kill must then reach its node (noted from B's 202: it depends on when the
    // POSTs happen to come, so it is not taken as the takeover).
    const relayTakeover = until('B to take the relay lease', () => b.logged(/relay lease taken/, killAt), {
      timeoutMs: 60_000,
      everyMs: 10,
    }).then(
      (line) => line.at - killAt,
      () => null,
    );
    const delivered = until(
      'a declaration POSTed to B after the kill to reach its node',
      () => accepted.find((d) => d.via === 'B' && d.at > killAt && received(d.digest) > 0),
      { timeoutMs: 60_000, everyMs: 10 },
    ).then(
      (d) => Math.min(...receipts.filter((r) => r.digest === d.digest).map((r) => r.at)) - d.answeredAt,
      () => null,
    );
    const ingestMs = await ingestTakeover;
    const relayMs = await relayTakeover;
    const deliveryMs = await delivered;

    // A comes back as an operator would restart it: it must stand by (B holds the queue and the lease).
    const a2 = serve('a2');
    engines.push(a2);
    const urlA2 = await a2.url;
    apis = [
      { name: 'A2', url: urlA2 },
      { name: 'B', url: urlB },
    ];
    const acceptedBeforeA2 = accepted.length;
    await until(
      'declarations through the restarted A and load after it',
      () => accepted.slice(acceptedBeforeA2).some((d) => d.via === 'A2') && accepted.length >= acceptedBeforeA2 + 4,
      60_000,
    );
    declaring = false;
    await declarer;
    load.finish();
    await load.done;

    // Settle: every report stored, every accepted declaration received, both read models at the store head.
    const everyReportStored = await until(
      'every confirmed report stored',
      async () => {
        const counts = await stored.refresh();
        for (const id of load.confirmed()) if (!counts.has(id)) return false;
        return true;
      },
      { timeoutMs: 60_000, everyMs: 100 },
    ).then(
      () => true,
      () => false,
    );
    const everyDeclarationReceived = await until(
      'every accepted declaration to reach its node',
      () => accepted.every((d) => received(d.digest) > 0),
      60_000,
    ).then(
      () => true,
      () => false,
    );
    // A node reports each declaration it applies; wait for those reports too, then for quiet.
    await until(
      'the nodes to report every declaration',
      () => {
        const reported = new Set(sims.flatMap((s) => s.confirmedReports().map((r) => r.declared)));
        return accepted.every((d) => reported.has(d.digest));
      },
      60_000,
    ).catch(() => undefined);
    await until(
      'every confirmed report stored',
      async () => {
        const counts = await stored.refresh();
        return [...load.confirmed()].every((id) => counts.has(id));
      },
      60_000,
    ).catch(() => undefined);
    const head = await reader.headPosition();
    const positionOf = async (base: string): Promise<string | null> =>
      ((await (await fetch(`${base}/healthz`)).json()) as { position: string | null }).position;
    await until(
      'both read models at the store head',
      async () => (await positionOf(urlA2)) === String(head) && (await positionOf(urlB)) === String(head),
      60_000,
    );
    const view = async (base: string): Promise<string> =>
      JSON.stringify(await (await fetch(`${base}/v1/nodes?prefix=two-${tag}-`, { headers: auth })).json());
    const [viewA2, viewB] = [await view(urlA2), await view(urlB)];
    const nodesListed = (JSON.parse(viewB) as { total: number }).total;
    const afterRestart = {
      a2Reports: await reportsAppended(urlA2),
      a2Published: await relayPublished(urlA2),
      bPublished: await relayPublished(urlB),
    };

    // Stop both (each writes its snapshot) and verify each snapshot against a replay of the store.
    const a2Code = await a2.stop();
    const bCode = await b.stop();
    const replay = async (name: string): Promise<{ ok: boolean; said: string }> => {
      try {
        const { stdout } = await promisify(execFile)(process.execPath, [
          new URL('../../bin/converge.js', import.meta.url).pathname,
          'replay',
          '--verify',
          '--json',
          '--store',
          scratch.url,
          '--snapshot',
          join(lab.dir, `${name}.snapshot.json`),
        ]);
        const last = JSON.parse(stdout.trim().split('\n').pop()!) as { verified: boolean; nodes: number; differences: number };
        return { ok: last.verified && last.nodes === NODES, said: `${last.nodes} nodes, ${last.differences} difference(s)` };
      } catch (e) {
        return { ok: false, said: (e as Error).message };
      }
    };
    const replayA2 = await replay('a2');
    const replayB = await replay('b');

    // Declarations seen more than once: only inside the at-least-once window, i.e. recorded before
    // the kill (A may have published them without saving its checkpoint), at most twice, at most a batch.
    const perDigest = new Map<string, number>();
    for (const r of receipts) perDigest.set(r.digest, (perDigest.get(r.digest) ?? 0) + 1);
    const repeated = [...perDigest].filter(([, n]) => n > 1);
    const acceptedAt = new Map(accepted.map((d) => [d.digest, d.at]));
    const repeatsInWindow =
      repeated.every(([digest, n]) => n === 2 && (acceptedAt.get(digest) ?? -Infinity) < killAt) && repeated.length <= RELAY_BATCH;
    const publishes = receipts.length;
    const recoverMs = ingestMs === null || relayMs === null ? null : Math.max(ingestMs, relayMs);

    return await tally(twoEngines, reader, load, recoverMs, {
      notes: [
        `A (active) and B (standing by): before the kill A had appended ${beforeKill.aReports} reports and published ${beforeKill.aPublished} declarations, B ${beforeKill.bReports} and ${beforeKill.bPublished}`,
        `takeover after SIGKILL of A: ingest ${ingestMs ?? '—'} ms (every report confirmed before the kill stored and one confirmed after it), relay ${relayMs ?? '—'} ms (B took the relay lease); time to recover = the larger; the first declaration POSTed to B after the kill reached its node ${deliveryMs === null ? '—' : `${Math.abs(deliveryMs)} ms ${deliveryMs < 0 ? 'before' : 'after'} B answered 202`}`,
        `${accepted.length} declarations accepted (${accepted.filter((d) => d.via === 'A').length} via A, ${accepted.filter((d) => d.via === 'B').length} via B, ${accepted.filter((d) => d.via === 'A2').length} via the restarted A), ${unanswered.length} POST(s) unanswered (in flight to A at the kill: ${unanswered.every((u) => u.startsWith('A:'))}), ${conflicts.length} refused 409 CONVERGE_ERR_WRONG_EXPECTED_REVISION (other sends took the serial 5 times, or the node's own events moved its stream 100 times in a row), ${otherRefusals.length} refused otherwise; the nodes received ${publishes} publishes of ${perDigest.size} digests, ${repeated.length} received twice (all recorded before the kill: ${repeatsInWindow})`,
        ...(otherRefusals.length === 0 ? [] : [`POSTs refused otherwise: ${[...new Set(otherRefusals)].slice(0, 3).join(' / ')}`]),
        `restarted A stood by: appended ${afterRestart.a2Reports} reports, published ${afterRestart.a2Published}; B published ${afterRestart.bPublished}`,
        `both APIs list the same ${nodesListed} nodes at position ${String(head)}: ${viewA2 === viewB}; converge replay --verify: A2 ${replayA2.said}, B ${replayB.said}`,
      ],
      checks: {
        passiveIdleWhileActiveLived:
          beforeKill.aReports > 0 && beforeKill.aPublished > 0 && beforeKill.bReports === 0 && beforeKill.bPublished === 0,
        survivorTookIngest: ingestMs !== null,
        survivorTookRelay: relayMs !== null && deliveryMs !== null,
        restartedEngineStoodBy: afterRestart.a2Reports === 0 && afterRestart.a2Published === 0,
        everyReportStored,
        everyDeclarationReceived,
        everyPostAnsweredOrInFlightAtTheKill:
          otherRefusals.length === 0 && unanswered.length <= 1 && unanswered.every((u) => u.startsWith('A:')),
        noRepeatOutsideTheWindow: repeatsInWindow,
        apisAgree: viewA2 === viewB && nodesListed === NODES,
        replayVerifiesEachSnapshot: replayA2.ok && replayB.ok,
        enginesStoppedCleanly: a2Code === 0 && bCode === 0,
      },
    });
  } finally {
    stopLoad();
    for (const s of sims) await s.stop().catch(() => undefined);
    for (const c of conns) await c.close().catch(() => undefined);
    for (const e of engines) await e.kill();
    await reader.close().catch(() => undefined);
    await scratch.drop().catch(() => undefined);
  }
}

export const twoEngines: Scenario = {
  name: 'two engines, one PostgreSQL store',
  faults: twoEnginesFaults,
  run: (lab) => runTwoEngines(lab),
};
