import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { defaultLeaseTtlMs } from '../../src/store/postgres/lease.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import type { AmqpConnection } from '../../src/transport/amqpConnection.ts';
import { meshTopology, nodeTopology } from '../../src/transport/topology.ts';
import { createManagementClient, seg } from '../../src/brokerAdmin/managementClient.ts';
import { defaultBroker, uniqueTag } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { createEngineHost, netnsUnavailable } from '../support/netns.ts';
import type { EngineHost, Link } from '../support/netns.ts';
import { scratchSchema } from '../support/postgres.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { until } from '../support/until.ts';
import { countLedger } from './declarationLedger.ts';
import { enrollSimulatedNodes, startReportLoad } from '../support/faults/simulatedFleet.ts';
import type { Accepted, Receipt } from '../support/faults/simulatedFleet.ts';
import { risesWithin, startDeclarer, tracer, watchCounters, writtenAt } from './partitionLoad.ts';
import type { Api } from './partitionLoad.ts';
import { readStored, tally } from './scenarios.ts';
import type { FaultLab, Scenario, ScenarioResult } from './scenarios.ts';

// Engines on separate hosts, and partitions. Two `converge serve` (the built CLI), each in a network
// namespace of its own (test/support/netns.ts) reaching PostgreSQL and RabbitMQ over links of its
// own; A starts first, so it ingests (mesh.reports' single active consumer) and holds the relay
// lease, B stands by. Under report load and declaration load one or both of A's links are cut by
// dropping every packet (a partition, not a reset), held until the takeover the case expects has
// happened, then healed:
// - store: A ↔ PostgreSQL. The relay lease must move to B within its bound (ttl and a read
//   interval; docs/operations.md, "Scaling out": the fencing argument), and A's last publish must
//   come before B took the lease. Ingest stays with A (it still holds the queue) and resumes at the heal.
// - broker: A ↔ RabbitMQ. The broker ends A's connection on missed heartbeats and hands
//   mesh.reports to B; the relay lease stays with A (its store link is fine).
// - both: A cut off altogether: both move.
// Counted: every confirmed report stored exactly once; every accepted declaration received (or
// replaced in its node's one-message inbox by a later one that was), none twice unless POSTed
// before the cut (the batch in flight: the at-least-once window), none out of order per node.
// Times to recover are printed, never asserted.

export type Cut = 'store' | 'broker' | 'both';
const linksOf: Record<Cut, Link[]> = { store: ['store'], broker: ['broker'], both: ['store', 'broker'] };
const cutNames: Record<Cut, string> = { store: 'PostgreSQL', broker: 'RabbitMQ', both: 'PostgreSQL and RabbitMQ' };

const NODES = 8;
const PACE_MS = 50;
const RELAY_BATCH = 100;
/** Bound given to B to take the relay lease after the cut: ttl, a read interval, and a margin for two busy cores. */
const leaseBoundMs = defaultLeaseTtlMs + 10_000;

export const partitionFaults = (cut: Cut): string =>
  `two \`converge serve\`, each in a network namespace of its own; the active one's link${cut === 'both' ? 's' : ''} to ${cutNames[cut]} cut (every packet dropped) under report and declaration load, then healed`;

const ms = (v: number | null): string => (v === null ? '—' : `${v} ms`);

export async function runPartition(lab: FaultLab, cut: Cut, scenario: Scenario): Promise<ScenarioResult> {
  const step = tracer(Date.now());
  const unavailable = await netnsUnavailable();
  if (unavailable !== null) throw new Error(`cannot put engines in network namespaces: ${unavailable}`);
  const scratch = scratchSchema('converge_part');
  const keyPath = join(lab.dir, 'signing.pem');
  const key = generateSigningKey();
  writeFileSync(keyPath, signingKeyToPem(key), { mode: 0o600 });
  const token = `partition-${uniqueTag()}${uniqueTag()}`;
  const auth = { authorization: `Bearer ${token}` };
  const tag = uniqueTag();
  const ids = Array.from({ length: NODES }, (_, i) => `part-${tag}-${i}`);
  const hosts: EngineHost[] = [];
  const engines: ServeProcess[] = [];
  const conns: AmqpConnection[] = [];
  const sims: SimulatedNode[] = [];
  const stops: (() => void)[] = [];
  const reader = createPostgresEventStore(scratch.url);
  try {
    const serve = (name: string, host: EngineHost): ServeProcess =>
      startServe(
        ['serve', '--port', '0'],
        {
          CONVERGE_STORE: host.storeUrl(scratch.url),
          CONVERGE_AMQP_URL: host.brokerUrl(lab.engineUrl),
          CONVERGE_MANAGEMENT_URL: host.brokerUrl(defaultBroker.managementUrl),
          CONVERGE_HOST: host.apiHost,
          CONVERGE_ENGINE_ID: `partition-${name}`,
          CONVERGE_SIGNING_KEY: keyPath,
          CONVERGE_API_TOKENS: `${token}:read,send`,
          CONVERGE_SNAPSHOT: join(lab.dir, `${name}.snapshot.json`),
          CONVERGE_LOG_LEVEL: 'info',
        },
        undefined,
        host.exec,
      );
    step('creating the namespaces');
    const hostA = await createEngineHost('a');
    hosts.push(hostA);
    const hostB = await createEngineHost('b');
    hosts.push(hostB);

    const mesh = meshTopology();
    const inboxes = ids.map((id) => nodeTopology(id));
    const topology = {
      exchanges: mesh.exchanges,
      queues: [...mesh.queues, ...inboxes.flatMap((t) => t.queues)],
      bindings: [...mesh.bindings, ...inboxes.flatMap((t) => t.bindings)],
    };
    await (await connectAmqp({ url: lab.engineUrl, logger, topology })).close();

    step('starting A');
    const a = serve('a', hostA);
    engines.push(a);
    const urlA = await a.url;
    await until('A to take the relay lease', () => a.logged(/relay lease taken/), 30_000);
    step('starting B');
    const b = serve('b', hostB);
    engines.push(b);
    const urlB = await b.url;

    step('enrolling the nodes');
    const receipts: Receipt[] = [];
    await enrollSimulatedNodes({ enroll: (id) => lab.enroll(id), ids, key, tag: 'partition', receipts, sims, conns });
    const load = startReportLoad(sims, PACE_MS);
    stops.push(load.stop);
    const apiA: Api = { name: 'A', url: urlA };
    const apiB: Api = { name: 'B', url: urlB };
    const declarer = startDeclarer(ids, auth, [apiA, apiB]);
    stops.push(declarer.stop);
    const accepted: readonly Accepted[] = declarer.accepted;
    const received = (digest: string): boolean => receipts.some((r) => r.digest === digest);
    step('load started');
    await until('load to flow and declarations to reach their nodes', () => load.confirmed().size >= 300 && receipts.length >= 4, 120_000);

    // A's and B's counters, polled through their APIs (the API links are never cut).
    const counters = { a: watchCounters(urlA), b: watchCounters(urlB) };
    stops.push(counters.a.stop, counters.b.stop);
    await until('the counters to be read', () => counters.a.now() !== null && counters.b.now() !== null, 30_000);
    const before = { a: counters.a.now()!, b: counters.b.now()! };

    // The cut. A's API cannot record a declaration without its store: POSTs go to B until the heal.
    declarer.use([apiB]);
    const confirmedBefore = load.confirmed();
    step(`cutting A from ${cutNames[cut]}`);
    await hostA.cut(linksOf[cut]);
    // From when every packet is dropped (the tc commands take a while on a busy machine).
    const cutAt = Date.now();
    const stored = new Map<string, number>();
    const storedNow = async (): Promise<Map<string, number>> => {
      for (const [id, n] of (await readStored(reader)).reports) stored.set(id, n);
      return stored;
    };
    // Service back, by a takeover or by the heal: reports (every one confirmed before the cut
    // stored, and one confirmed after it) and declarations (one POSTed after the cut received).
    const ingestBack = until(
      'a report published after the cut stored',
      async () => {
        const s = await storedNow();
        for (const id of confirmedBefore) if (!s.has(id)) return false;
        return [...load.sentAt()].some(([id, at]) => at > cutAt && s.has(id));
      },
      { timeoutMs: 120_000, everyMs: 200 },
    ).then(
      () => Date.now() - cutAt,
      () => null,
    );
    const deliveryBack = until(
      'a declaration POSTed after the cut to be received',
      () => accepted.some((d) => d.at > cutAt && received(d.digest)),
      {
        timeoutMs: 120_000,
        everyMs: 20,
      },
    ).then(
      () => Date.now() - cutAt,
      () => null,
    );

    // Hold the partition until what this case expects has happened (each bounded), then heal.
    step('waiting for the relay lease');
    const relayTaken = await until('B to take the relay lease', () => b.logged(/relay lease taken/, cutAt), {
      // Cut from the broker only, A keeps the lease (its store link is fine): give B the same span to show it does not.
      timeoutMs: cut === 'broker' ? defaultLeaseTtlMs + 2_000 : leaseBoundMs,
      everyMs: 10,
    }).then(
      // When B wrote it: the line reaches this process later, by a pipe a busy machine may be slow to drain.
      (line) => writtenAt(line),
      () => null,
    );
    const ingestMoved =
      cut === 'store'
        ? null
        : await until(
            'B to ingest',
            () => (counters.b.now()?.reports ?? 0) > before.b.reports && counters.b.changedAt('reports'),
            60_000,
          ).then(
            (at) => at,
            () => null,
          );
    if (cut !== 'broker')
      await until(
        'a declaration POSTed after the cut to be received',
        () => accepted.some((d) => d.at > cutAt && received(d.digest)),
        30_000,
      ).catch(() => undefined);
    // Evidence for the relay checks: A's counters read once after B took the lease, while A is still cut off.
    if (relayTaken !== null)
      await until("A's counters to be read after B took the lease", () => counters.a.readWithin(relayTaken, Date.now()), 30_000).catch(
        () => undefined,
      );
    const aAtHeal = counters.a.now()!;
    step('healing');
    const healAt = Date.now();
    await hostA.heal();
    declarer.use([apiA, apiB]);

    // After the heal: A says it lost the lease (if B took it), its API records again, the load goes on.
    step('healed');
    const lostLogged =
      relayTaken === null
        ? null
        : await until('A to say it lost the relay lease', () => a.logged(/relay lease lost/, cutAt), 60_000).then(
            (l) => l.at,
            () => null,
          );
    step('declarations after the heal');
    const acceptedAtHeal = accepted.length;
    const aRecordsAgain = await until(
      'declarations through A and B after the heal',
      () => accepted.slice(acceptedAtHeal).filter((d) => d.via === 'A').length >= 2 && accepted.length >= acceptedAtHeal + 6,
      90_000,
    ).then(
      () => true,
      () => false,
    );
    step('waiting for service back');
    const ingestMs = await ingestBack;
    const deliveryMs = await deliveryBack;
    declarer.use([]);
    await declarer.stop();
    load.finish();
    await load.done;

    // Settle: every confirmed report stored, every accepted declaration received (or replaced by a later one that was).
    step('settling');
    await until(
      'every accepted declaration received or replaced',
      () => countLedger(accepted, receipts).undelivered.length === 0,
      60_000,
    ).catch(() => undefined);
    // A node reports each declaration it applies: those reports must be stored too, so wait for them first.
    await until(
      'the nodes to report every declaration they received',
      () => {
        const reported = new Set(sims.flatMap((x) => x.confirmedReports().map((r) => r.declared)));
        return receipts.every((r) => reported.has(r.digest));
      },
      60_000,
    ).catch(() => undefined);
    const everyReportStored = await until(
      'every confirmed report stored',
      async () => {
        const st = await storedNow();
        return [...load.confirmed()].every((id) => st.has(id));
      },
      60_000,
    ).then(
      () => true,
      () => false,
    );
    const head = await reader.headPosition();
    const positionOf = async (base: string): Promise<string | null> =>
      ((await (await fetch(`${base}/healthz`)).json()) as { position: string | null }).position;
    const atHead = await until(
      'both read models at the store head',
      async () => (await positionOf(urlA)) === String(head) && (await positionOf(urlB)) === String(head),
      60_000,
    ).then(
      () => true,
      () => false,
    );
    const view = async (base: string): Promise<string> =>
      JSON.stringify(await (await fetch(`${base}/v1/nodes?prefix=part-${tag}-`, { headers: auth })).json());
    const apisAgree = atHead && (await view(urlA)) === (await view(urlB));
    const end = { a: counters.a.now()!, b: counters.b.now()! };
    const missing = [...load.confirmed()].filter((id) => !stored.has(id));

    step('counting');
    const ledger = countLedger(accepted, receipts);
    const acceptedAt = new Map(accepted.map((d) => [d.digest, d.at]));
    // The at-least-once window: a handover of the lease may publish again the batch the last holder had
    // in flight, so a declaration may arrive once more per handover it was recorded before (a batch each).
    // A batch that failed (a confirm or the lease check timed out on a busy machine) is published again from the
    // checkpoint by the same engine: that is inside the window too (src/engine/relay.ts).
    const handovers = [...a.lines(), ...b.lines()]
      .filter((l) => /relay lease taken|relay batch failed/.test(l.msg))
      .map((l) => l.at)
      .sort((x, y) => x - y)
      .slice(1);
    const lastHandover = handovers[handovers.length - 1] ?? -Infinity;
    const repeatsInWindow =
      ledger.repeated.every(([digest, n]) => n <= 1 + handovers.length && (acceptedAt.get(digest) ?? Infinity) < lastHandover) &&
      ledger.repeated.length <= RELAY_BATCH * handovers.length;
    // Who wrote what, and when, is judged by `issued` (counted as a publish is written): a confirm can
    // reach A long after its message landed — the broker sends it once the link heals, even on a
    // connection it has since closed — so `published` may rise after the heal for a write before the cut.
    // A rise is known only to lie between two reads (partitionLoad.ts): A wrote after B took the lease
    // if its count rose after a read sent once B had it, and before A took the lease again (by A's
    // own log stamp), if it did. A rise across B's taking the lease or A's retaking it counts for neither side.
    const aRetook = a.logged(/relay lease taken/, cutAt);
    const aRetookAt = aRetook === undefined ? Infinity : writtenAt(aRetook);
    const aIssued = counters.a.rises('issued');
    const aIssuedAfterTake = relayTaken === null ? [] : risesWithin(aIssued, relayTaken, aRetookAt);
    const aLastPublish = aIssued.filter((r) => r.by >= cutAt).pop();
    const aReadAfterTake = relayTaken !== null && counters.a.readWithin(relayTaken, healAt);
    const relayMs = relayTaken === null ? null : relayTaken - cutAt;
    const ingestMovedMs = ingestMoved === null ? null : ingestMoved - cutAt;
    // An engine cut off mid-append holds the store's append lock until the server ends its session.
    const duringCut = accepted.filter((d) => d.via === 'B' && d.at > cutAt && d.answeredAt < healAt).length;
    const byVia = (v: string): number => accepted.filter((d) => d.via === v).length;
    const notes = [
      `A cut from ${cutNames[cut]} for ${healAt - cutAt} ms (held until the takeover this case expects, each wait bounded)`,
      `relay lease: ${relayMs === null ? `stayed with A (B did not take it in ${cut === 'broker' ? defaultLeaseTtlMs + 2_000 : leaseBoundMs} ms)` : `taken by B ${relayMs} ms after the cut (ttl ${defaultLeaseTtlMs} ms); A's issued count last rose ${aLastPublish === undefined ? 'before the cut' : `between ${aLastPublish.after - cutAt} and ${aLastPublish.by - cutAt} ms after the cut`}${aRetook === undefined ? '' : `; A took the lease again ${aRetookAt - cutAt} ms after the cut`}; A said it lost it ${lostLogged === null ? 'never' : `${lostLogged - cutAt} ms after the cut`}`}`,
      `ingest: ${ingestMovedMs === null ? 'stayed with A (it keeps mesh.reports while its broker link lives)' : `moved to B ${ingestMovedMs} ms after the cut`}; reports flowing into the store again ${ms(ingestMs)} after the cut, declarations POSTed after the cut received ${ms(deliveryMs)} after it; healed ${healAt - cutAt} ms after the cut`,
      `A appended ${end.a.reports - before.a.reports} reports, issued ${end.a.issued - before.a.issued} declarations and saw ${end.a.published - before.a.published} confirmed after the counters were first read (${aAtHeal.issued - before.a.issued} and ${aAtHeal.published - before.a.published} by the heal), B ${end.b.reports - before.b.reports}, ${end.b.issued - before.b.issued} and ${end.b.published - before.b.published}`,
      `${accepted.length} declarations accepted (${byVia('A')} via A, ${byVia('B')} via B, ${duringCut} of those via B during the partition), ${declarer.unanswered.length} POSTs unanswered, ${declarer.conflicts.length} refused 409, ${declarer.otherRefusals.length} refused otherwise${declarer.otherRefusals.length > 0 ? ` (${declarer.otherRefusals.slice(0, 2).join(' / ')})` : ''}; ${receipts.length} receipts: ${ledger.received} received, ${ledger.superseded} replaced in the inbox by a later one that was received, ${ledger.undelivered.length} undelivered${ledger.undelivered.length > 0 ? ` (${ledger.undelivered.slice(0, 3).join(', ')})` : ''}; ${ledger.repeated.length} received twice (${handovers.length} handover(s) of the relay lease or failed batches; all recorded before the last: ${repeatsInWindow}), ${ledger.repeatsAfterNewer} of those repeats after a newer one; ${ledger.outOfOrder.length} out of order`,
      `both APIs at the store head ${String(head)} with the same nodes: ${apisAgree}`,
      ...(missing.length === 0
        ? []
        : [
            `missing from the store: ${missing.slice(0, 3).join(', ')} (sent ${missing
              .slice(0, 3)
              .map((id) => (load.sentAt().get(id) ?? 0) - cutAt)
              .join(', ')} ms after the cut); ${await queueDepths(lab)}`,
          ]),
    ];
    const relayChecks: Record<string, boolean> =
      cut === 'broker'
        ? {}
        : {
            'the relay lease moved to B within its bound': relayTaken !== null,
            "A's counters were read after B took the lease, before the heal": aReadAfterTake,
            // After the heal A may publish again as the holder (B may lose the lease on a busy machine).
            'A issued nothing from B taking the lease until it held the lease again': relayTaken !== null && aIssuedAfterTake.length === 0,
            'A said it lost the lease': lostLogged !== null,
          };
    const ingestChecks: Record<string, boolean> = cut === 'store' ? {} : { 'ingest moved to B': ingestMoved !== null };
    const recoverMs = ingestMs === null || deliveryMs === null ? null : Math.max(ingestMs, deliveryMs);
    return await tally(scenario, reader, load, recoverMs, {
      notes,
      checks: {
        ...relayChecks,
        ...ingestChecks,
        'every confirmed report stored': everyReportStored,
        "A's API recorded declarations again after the heal": aRecordsAgain,
        ...(cut === 'broker' ? {} : { "B's API recorded declarations while A was cut from the store": duringCut > 0 }),
        'every accepted declaration received or replaced by a later one': ledger.undelivered.length === 0,
        'none received twice outside the at-least-once window': repeatsInWindow,
        'none out of order per node': ledger.outOfOrder.length === 0,
        'no POST refused but with 409': declarer.otherRefusals.length === 0,
        'both APIs agree': apisAgree,
      },
    });
  } finally {
    for (const s of stops) s();
    for (const s of sims) await s.stop().catch(() => undefined);
    for (const c of conns) await c.close().catch(() => undefined);
    for (const e of engines) await e.kill();
    for (const h of hosts) await h.remove();
    await reader.close().catch(() => undefined);
    await scratch.drop().catch(() => undefined);
  }
}

/** mesh.reports' and mesh.dead's messages (ready, unacked) and consumers, for a note when a report is missing. */
async function queueDepths(lab: FaultLab): Promise<string> {
  const admin = createManagementClient({ managementUrl: lab.scratch.managementUrl });
  const parts: string[] = [];
  for (const q of ['mesh.reports', 'mesh.dead']) {
    const r = await admin.request('GET', `/queues/${seg(lab.scratch.vhost)}/${seg(q)}`).catch(() => null);
    const b = (r?.body ?? {}) as { messages_ready?: number; messages_unacknowledged?: number; consumers?: number };
    parts.push(`${q}: ${b.messages_ready ?? '?'} ready, ${b.messages_unacknowledged ?? '?'} unacked, ${b.consumers ?? '?'} consumers`);
  }
  return parts.join(', ');
}

export const partitionScenario = (cut: Cut): Scenario => {
  const scenario: Scenario = {
    name: `engine partitioned from ${cutNames[cut]}`,
    faults: partitionFaults(cut),
    run: (lab) => runPartition(lab, cut, scenario),
  };
  return scenario;
};
export const partitionScenarios: readonly Scenario[] = (['store', 'broker', 'both'] as const).map(partitionScenario);
