import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createPgLab } from '../support/faults/pgCluster.ts';
import type { PgCluster } from '../support/faults/pgCluster.ts';
import { until } from '../support/until.ts';
import { startPgFleet } from './pgFleet.ts';
import type { PgFleet } from './pgFleet.ts';
import { readStored, tally } from './scenarios.ts';
import type { FaultLab, Scenario, ScenarioResult } from './scenarios.ts';

// PostgreSQL itself failing under `converge serve` (docs/operations.md, "PostgreSQL restart and
// failover"). The scenario makes clusters of its own on free ports (test/support/faults/pgCluster.ts;
// the shared server on 5432 is never touched) and runs one or two engines on them while nodes
// report and declarations are POSTed:
// - restart: the server is stopped with `pg_ctl stop -m immediate` (every backend killed, crash
//   recovery at start) and started again on the same port;
// - promote: a primary with a synchronous standby (synchronous_standby_names, synchronous_commit
//   = on); the engines get both hosts in one URL (libpq's multi-host form, src/store/postgres/hosts.ts).
//   The primary is stopped the same way and never comes back; the standby is promoted.
// Then: every report the broker confirmed stored exactly once, every declaration an API accepted
// before the fault still in the store after it and received by its node, the relay lease taken
// again, a declaration accepted after the fault delivered. Times are measured, never asserted:
// from the stop until every report confirmed before it and one confirmed after it are stored
// (ingest), until an engine logs `relay lease taken` (relay), and until a declaration accepted
// after the fault reaches its node (delivery); time to recover = the largest.

export type PgFault = 'restart' | 'promote';

const STANDBY = 'converge_standby';
const RELAY_BATCH = 100;

const describeFault = (fault: PgFault, engines: 1 | 2): string =>
  `${engines === 1 ? 'one `converge serve`' : 'two `converge serve` (relay-lease holder and a standby)'} on a PostgreSQL cluster of the scenario's own; ${
    fault === 'restart'
      ? 'the server stopped with `pg_ctl stop -m immediate` under report load and declarations, and started again'
      : 'a primary with a synchronous streaming standby, the engines given both in one multi-host URL; the primary stopped with `pg_ctl stop -m immediate` under load for good, the standby promoted'
  }`;

/** The relay lease's generation (the fencing token: one more at every change of holder). */
async function relayGeneration(c: PgCluster, schema: string): Promise<number> {
  const rows = await c.query<{ g: string }>(`SELECT generation::text AS g FROM ${schema}.leases WHERE name = 'relay'`);
  return Number(rows[0]?.g ?? 0);
}

async function engineConnections(c: PgCluster): Promise<number> {
  const rows = await c.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_stat_activity WHERE application_name = 'converge'`);
  return Number(rows[0]?.n ?? 0);
}

/** Digests of every DeclarationSent in the store. */
async function storedDeclarations(store: EventStore): Promise<Set<string>> {
  const out = new Set<string>();
  for await (const batch of store.readAll()) for (const e of batch) if (e.type === 'DeclarationSent') out.add(e.data.digest);
  return out;
}

const waited = <T>(p: Promise<T>): Promise<T | null> =>
  p.then(
    (v) => v,
    () => null,
  );

export async function runPostgresFault(lab: FaultLab, scenario: Scenario, fault: PgFault, engineCount: 1 | 2): Promise<ScenarioResult> {
  const pgLab = createPgLab(fault);
  let fleet: PgFleet | null = null;
  let reader: EventStore | null = null;
  try {
    const primary = await pgLab.primary(fault === 'promote' ? { synchronousStandby: STANDBY } : {});
    const standby = fault === 'promote' ? await pgLab.standby(primary, STANDBY) : null;
    let syncState = 'none (no standby)';
    if (standby !== null) {
      // Commits wait for the standby from here on; the engines start only once it streams as the synchronous one.
      const row = await until(
        'the standby to stream as the synchronous standby',
        async () =>
          (
            await primary.query<{ s: string }>(`SELECT sync_state AS s FROM pg_stat_replication WHERE application_name = '${STANDBY}'`)
          ).find((r) => r.s === 'sync'),
        60_000,
      );
      syncState = row.s;
    }
    const schema = `converge_pgf`;
    const hosts = [primary, ...(standby === null ? [] : [standby])].map((c) => `127.0.0.1:${c.port}`).join(',');
    const storeUrl = `postgres://postgres@${hosts}/postgres?schema=${schema}`;

    fleet = await startPgFleet(lab, { storeUrl, engines: engineCount, nodes: 8, paceMs: 40, declareEveryMs: 150 });
    const f = fleet;
    reader = createPostgresEventStore(storeUrl);
    const store = reader;

    await until(
      'load to flow and declarations to reach their nodes',
      () => f.load.confirmed().size >= 300 && f.receipts.length >= 4,
      60_000,
    );
    const generationBefore = await relayGeneration(primary, schema);
    const confirmedBefore = f.load.confirmed();
    const acceptedBefore = [...f.accepted];
    const commitSetting = (await primary.query<{ s: string }>("SELECT current_setting('synchronous_commit') AS s"))[0]?.s ?? '?';

    // The fault.
    const stopAt = Date.now();
    await primary.crash();
    const downAt = Date.now();
    if (fault === 'restart') await primary.start();
    else await standby!.promote();
    const upAt = Date.now();
    const live = fault === 'restart' ? primary : standby!;

    const ingest = waited(
      until(
        'ingest to resume',
        async () => {
          const { reports } = await readStored(store);
          for (const id of confirmedBefore) if (!reports.has(id)) return false;
          // Confirmed once the server was down: stored only by an engine that reconnected.
          for (const [id, at] of f.confirmedAt) if (at > downAt && reports.has(id)) return true;
          return false;
        },
        { timeoutMs: 90_000, everyMs: 50 },
      ).then(() => Date.now() - stopAt),
    );
    const lease = waited(
      until(
        'an engine to take the relay lease again',
        () => f.engines.map((e) => ({ name: e.name, line: e.serve.logged(/relay lease taken/, stopAt) })).find((x) => x.line !== undefined),
        { timeoutMs: 90_000, everyMs: 20 },
      ).then((x) => ({ name: x.name, ms: x.line!.at - stopAt })),
    );
    const delivery = waited(
      until(
        'a declaration accepted after the fault to reach its node',
        () => f.accepted.find((d) => d.at > upAt && f.received(d.digest) > 0),
        { timeoutMs: 90_000, everyMs: 20 },
      ).then((d) => Math.min(...f.receipts.filter((r) => r.digest === d.digest).map((r) => r.at)) - stopAt),
    );
    const [ingestMs, leaseTaken, deliveryMs] = [await ingest, await lease, await delivery];

    // More load after recovery, then settle.
    const acceptedAfterRecovery = f.accepted.length;
    await until('declarations accepted after recovery', () => f.accepted.length >= acceptedAfterRecovery + 4, 60_000).catch(
      () => undefined,
    );
    await f.stopDeclaring();
    f.load.finish();
    await f.load.done;
    const everyReportStored = await waited(
      until(
        'every confirmed report stored',
        async () => {
          const { reports } = await readStored(store);
          return [...f.load.confirmed()].every((id) => reports.has(id));
        },
        { timeoutMs: 60_000, everyMs: 200 },
      ),
    );
    const everyDeclarationReceived = await waited(
      until('every accepted declaration to reach its node', () => f.accepted.every((d) => f.received(d.digest) > 0), 60_000),
    );
    await until(
      'the nodes to report every declaration, and those reports stored',
      async () => {
        const { reports } = await readStored(store);
        return [...f.load.confirmed()].every((id) => reports.has(id));
      },
      { timeoutMs: 30_000, everyMs: 200 },
    ).catch(() => undefined);
    const head = await store.headPosition();
    const positionOf = async (base: string): Promise<string | null> =>
      ((await (await fetch(`${base}/healthz`)).json()) as { position: string | null }).position;
    const readModelsAtHead = await waited(
      until(
        'every read model at the store head',
        async () => {
          for (const e of f.engines) if ((await positionOf(e.url)) !== String(head)) return false;
          return true;
        },
        60_000,
      ),
    );
    const positions = (await Promise.all(f.engines.map(async (e) => `${e.name} ${await positionOf(e.url).catch(() => '?')}`))).join(', ');
    const declarations = await storedDeclarations(store);
    const beforeStillStored = acceptedBefore.filter((d) => declarations.has(d.digest)).length;
    const generationAfter = await relayGeneration(live, schema);
    const connectionsOnLive = await engineConnections(live);

    const perDigest = new Map<string, number>();
    for (const r of f.receipts) perDigest.set(r.digest, (perDigest.get(r.digest) ?? 0) + 1);
    const repeated = [...perDigest].filter(([, n]) => n > 1);
    // The at-least-once window: a declaration recorded before the server went down may have been
    // published with the relay's checkpoint then lost with its connection, so it goes out again.
    // Recorded before then = POSTed before the stop command returned (the server took POSTs until it died).
    const postedAt = new Map(f.accepted.map((d) => [d.digest, d.at]));
    const repeatsInWindow =
      repeated.every(([digest, n]) => n === 2 && (postedAt.get(digest) ?? -Infinity) < downAt) && repeated.length <= RELAY_BATCH;
    const refusedDuring = f.refused.filter((r) => r.at >= stopAt);
    const refusedBefore = f.refused.filter((r) => r.at < stopAt);
    const codes = [...new Set(refusedDuring.map((r) => r.what))].slice(0, 4).join(' / ');

    const exits: (number | null)[] = [];
    for (const e of f.engines) exits.push(await e.serve.stop());
    const recoverMs =
      ingestMs === null || leaseTaken === null || deliveryMs === null ? null : Math.max(ingestMs, leaseTaken.ms, deliveryMs);

    return await tally(scenario, store, f.load, recoverMs, {
      notes: [
        fault === 'restart'
          ? `server down ${downAt - stopAt} ms (stop -m immediate), back accepting connections ${upAt - stopAt} ms after the stop began (crash recovery)`
          : `synchronous_commit ${commitSetting}, standby sync_state ${syncState} before the stop; primary gone ${downAt - stopAt} ms after the stop began, standby promoted ${upAt - stopAt} ms after it; the old primary never restarted`,
        `recovery after the stop (after the server was back): ingest ${ingestMs ?? '—'} ms${ingestMs === null ? '' : ` (${ingestMs - (upAt - stopAt)} ms)`} (every report confirmed before the stop stored and one confirmed once the server was down), relay lease taken again by ${leaseTaken === null ? '—' : `${leaseTaken.name} after ${leaseTaken.ms} ms (${leaseTaken.ms - (upAt - stopAt)} ms)`} (generation ${generationBefore} → ${generationAfter}), first declaration accepted after the fault at its node ${deliveryMs === null ? '—' : `${deliveryMs} ms (${deliveryMs - (upAt - stopAt)} ms)`}; time to recover = the largest`,
        `${confirmedBefore.size} reports confirmed and ${acceptedBefore.length} declarations accepted before the stop: ${beforeStillStored} of those declarations in the store after it`,
        `${f.accepted.length} declarations accepted in all (${f.engines.map((e) => `${f.accepted.filter((d) => d.via === e.name).length} via ${e.name}`).join(', ')}); ${refusedDuring.length} POSTs sent from the stop on refused or unanswered (${codes || 'none'}), ${refusedBefore.length} before it${refusedBefore.length === 0 ? '' : ` (${[...new Set(refusedBefore.map((r) => r.what))].join(' / ')})`}; the nodes received ${f.receipts.length} publishes of ${perDigest.size} digests, ${repeated.length} twice (all POSTed before the server was down: ${repeatsInWindow})`,
        `engine connections on the ${fault === 'restart' ? 'restarted server' : 'promoted standby'} at the end: ${connectionsOnLive}; every read model at the store head ${String(head)}: ${readModelsAtHead !== null}${readModelsAtHead === null ? ` (${positions})` : ''}`,
      ],
      checks: {
        everyReportStored: everyReportStored !== null,
        acceptedBeforeTheStopStillStored: beforeStillStored === acceptedBefore.length,
        everyDeclarationReceived: everyDeclarationReceived !== null,
        relayLeaseTakenAgain: leaseTaken !== null && generationAfter > generationBefore,
        deliveredAfterTheFault: deliveryMs !== null,
        noRepeatOutsideTheWindow: repeatsInWindow,
        readModelsAtHead: readModelsAtHead !== null,
        ...(fault === 'promote' ? { standbyWasSynchronous: syncState === 'sync' && commitSetting === 'on' } : {}),
        enginesStoppedCleanly: exits.every((c) => c === 0),
      },
    });
  } finally {
    await fleet?.close();
    await reader?.close().catch(() => undefined);
    await pgLab.remove();
  }
}

export const postgresFault = (fault: PgFault, engines: 1 | 2): Scenario => {
  const scenario: Scenario = {
    name:
      fault === 'restart'
        ? `PostgreSQL restart, ${engines === 1 ? 'one engine' : 'two engines'}`
        : `PostgreSQL failover to a synchronous standby, ${engines === 1 ? 'one engine' : 'two engines'}`,
    faults: describeFault(fault, engines),
    run: (lab) => runPostgresFault(lab, scenario, fault, engines),
  };
  return scenario;
};
