import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import type { Fleet } from '../api/types.ts';
import { livenesses, statuses } from '../api/types.ts';
import { NeedsAttention } from '../components/NeedsAttention.tsx';
import { NodeTable } from '../components/NodeTable.tsx';
import { Sparkline } from '../components/Sparkline.tsx';
import type { LatencyPoint } from '../components/Sparkline.tsx';
import { StackedBar } from '../components/StackedBar.tsx';
import { StreamIndicator } from '../components/StreamIndicator.tsx';
import { TimeTravel } from '../components/TimeTravel.tsx';
import { count, duration, livenessGlyph, markOnce, percent, shortDigest, statusGlyph, time } from '../format.ts';
import { useEvents, useLoad, useThrottle } from '../hooks.ts';
import { setQuery } from '../router.ts';
import { Problemish } from './common.tsx';

// The fleet page: counts, cohorts, latency, anomalies and the node table, live from
// /v1/events; with "as of", the summary is the fleet folded up to that moment (GET /v1/fleet?at=).

const historyPoints = 24;

function Summary({ fleet }: { fleet: Fleet }) {
  const statusParts = statuses.map((s) => ({
    key: s,
    label: s,
    value: fleet.byStatus[s],
    glyph: statusGlyph[s],
    className: `status-${s}`,
    href: `/?status=${s}`,
  }));
  const livenessParts = livenesses.map((l) => ({
    key: l,
    label: l === 'never-seen' ? 'never seen' : l === 'not-observed' ? 'not observed' : l,
    value: fleet.byLiveness[l],
    glyph: livenessGlyph[l],
    className: `liveness-${l}`,
    href: `/?liveness=${l}`,
  }));
  return (
    <div class="bars card" data-testid="fleet-counts">
      <h2>
        {count(fleet.nodes)} node{fleet.nodes === 1 ? '' : 's'}
      </h2>
      <StackedBar title="Status" parts={statusParts} total={fleet.nodes} />
      <StackedBar title="Liveness" parts={livenessParts} total={fleet.nodes} />
      {fleet.observation?.observed === false && (
        // An engine without ingest says not-observed rather than guess from old sightings (docs/dashboard.md).
        <p class="muted" data-testid="not-observed-reason">
          Liveness not observed: {fleet.observation.reason}
        </p>
      )}
    </div>
  );
}

function Cohorts({ fleet }: { fleet: Fleet }) {
  return (
    <section class="card" aria-labelledby="cohorts-h">
      <h2 id="cohorts-h">Spec cohorts</h2>
      <p class="muted">
        Nodes grouped by the spec of their latest declaration; caught up = the node's latest report names that declaration.
      </p>
      {fleet.cohorts.length === 0 ? (
        <p>No declaration has been sent yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="cohorts">
            <thead>
              <tr>
                <th scope="col">Spec digest</th>
                <th scope="col" class="num">
                  Nodes
                </th>
                <th scope="col">Caught up</th>
                <th scope="col">Behind · degr. · refused</th>
              </tr>
            </thead>
            <tbody>
              {fleet.cohorts.map((c) => (
                <tr key={c.spec}>
                  <th scope="row">
                    <a href={`/?spec=${c.spec}`} title={`show the nodes sent spec ${c.spec}`}>
                      <code>{shortDigest(c.spec)}</code>
                    </a>
                  </th>
                  <td class="num">{count(c.nodes)}</td>
                  <td>
                    <meter min={0} max={c.nodes} value={c.caughtUp} aria-label={`${c.caughtUp} of ${c.nodes} caught up`} />{' '}
                    {count(c.caughtUp)} ({percent(c.caughtUp, c.nodes)})
                  </td>
                  <td>
                    {count(c.byStatus.behind)} · {count(c.byStatus.degraded)} · {count(c.byStatus.refused)}
                  </td>
                </tr>
              ))}
              {fleet.otherCohorts.cohorts > 0 && (
                <tr>
                  <th scope="row">{count(fleet.otherCohorts.cohorts)} other specs</th>
                  <td class="num">{count(fleet.otherCohorts.nodes)}</td>
                  <td>
                    {count(fleet.otherCohorts.caughtUp)} ({percent(fleet.otherCohorts.caughtUp, fleet.otherCohorts.nodes)})
                  </td>
                  <td />
                </tr>
              )}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function Latency({ fleet, points }: { fleet: Fleet; points: readonly LatencyPoint[] }) {
  const c = fleet.convergence;
  return (
    <section class="card" aria-labelledby="latency-h">
      <h2 id="latency-h">Convergence latency</h2>
      <p class="muted">From a send to the first report naming it, over each node's recent declarations.</p>
      <dl class="kv">
        <div>
          <dt>p50</dt>
          <dd data-testid="p50">{duration(c.p50Ms)}</dd>
        </div>
        <div>
          <dt>p90</dt>
          <dd>{duration(c.p90Ms)}</dd>
        </div>
        <div>
          <dt>p99</dt>
          <dd>{duration(c.p99Ms)}</dd>
        </div>
        <div>
          <dt>max</dt>
          <dd>{duration(c.maxMs)}</dd>
        </div>
        <div>
          <dt>acknowledged</dt>
          <dd>{count(c.acknowledged)}</dd>
        </div>
        <div>
          <dt>superseded unread</dt>
          <dd>{count(c.superseded)}</dd>
        </div>
      </dl>
      <Sparkline points={points} label={`Latency p50, p90 and p99 over time; now p50 ${duration(c.p50Ms)}, p99 ${duration(c.p99Ms)}`} />
    </section>
  );
}

function Anomalies({ fleet }: { fleet: Fleet }) {
  const a = fleet.anomalies;
  return (
    <section class="card" aria-labelledby="anomalies-h">
      <h2 id="anomalies-h">Reports that could not catch a node up</h2>
      <dl class="kv">
        <div>
          <dt title="names a declaration sent earlier than the latest: the seed's race">stale</dt>
          <dd data-testid="anomaly-stale">{count(a.stale)}</dd>
        </div>
        <div>
          <dt title="names a digest never sent to that node: possible tampering">unknown</dt>
          <dd>{count(a.unknown)}</dd>
        </div>
        <div>
          <dt title="a legacy report with no digest">undeclared</dt>
          <dd>{count(a.undeclared)}</dd>
        </div>
      </dl>
      <p class="muted">
        Stale: names an earlier declaration (a race). Unknown: names a digest never sent to the node. Undeclared: names none.
      </p>
    </section>
  );
}

export function FleetPage({ url }: { url: URL }) {
  const at = url.searchParams.get('at');
  const [liveTick, setLiveTick] = useState(0);
  const [tableVersion, setTableVersion] = useState(0);
  const live = useLoad(`live:${liveTick}`, (signal) => api.fleet(null, signal));
  const asOf = useLoad(at === null ? null : `at:${at}`, (signal) => api.fleet(at, signal));
  const refresh = useThrottle(() => {
    setLiveTick((t) => t + 1);
    setTableVersion((v) => v + 1);
  }, 1_000);
  const stream = useEvents(undefined, () => refresh());
  const [points, setPoints] = useState<LatencyPoint[]>([]);

  // The latency history: the fleet as of evenly spaced positions, asked once the page is up.
  const head = live.data?.position ?? null;
  const [historyFor, setHistoryFor] = useState<string | null>(null);
  useEffect(() => {
    if (head === null || historyFor !== null) return undefined;
    setHistoryFor(head);
    const c = new AbortController();
    void (async () => {
      const max = Number(head);
      const got: LatencyPoint[] = [];
      for (let i = 1; i <= historyPoints && !c.signal.aborted; i++) {
        const p = Math.max(1, Math.round((max * i) / historyPoints));
        try {
          const f = await api.fleet(String(p), c.signal);
          if (f.moment != null)
            got.push({ t: Date.parse(f.moment), p50: f.convergence.p50Ms, p90: f.convergence.p90Ms, p99: f.convergence.p99Ms });
        } catch {
          return;
        }
      }
      setPoints((now) => [...got, ...now]);
    })();
    return () => c.abort();
  }, [head]);
  useEffect(() => {
    const f = live.data;
    if (f === null) return;
    setPoints((now) =>
      [...now, { t: Date.now(), p50: f.convergence.p50Ms, p90: f.convergence.p90Ms, p99: f.convergence.p99Ms }].slice(-400),
    );
  }, [live.data]);

  const fleet = at === null ? live.data : (asOf.data ?? null);
  useEffect(() => {
    if (fleet !== null) markOnce('converge:fleet-summary');
  }, [fleet !== null]);
  const error = at === null ? live.error : asOf.error;
  return (
    <>
      <div class="page-head">
        <h1>Fleet</h1>
        <StreamIndicator status={stream} />
      </div>
      {error !== null && <Problemish error={error} what="the fleet" />}
      <TimeTravel
        id="fleet-tt"
        stops={{ min: 1, max: Math.max(1, Number(live.data?.position ?? 1)) }}
        at={at}
        onChange={(next) => setQuery({ at: next })}
        shownMoment={asOf.data?.moment ?? null}
        shownPosition={asOf.data?.position ?? null}
        busy={asOf.loading}
      />
      {at !== null && (
        <p class="banner" role="note">
          The counts, cohorts, latency and anomalies below are{' '}
          <strong>as of {asOf.data?.moment != null ? time(asOf.data.moment) : at}</strong>. The needs-attention lists and the node table
          show the present.
        </p>
      )}
      {fleet === null ? (
        <p aria-busy="true">Loading the fleet…</p>
      ) : (
        <div class="grid">
          <Summary fleet={fleet} />
          <NeedsAttention version={tableVersion} />
          <Cohorts fleet={fleet} />
          <Latency
            fleet={fleet}
            points={at === null ? points : points.filter((p) => fleet.moment == null || p.t <= Date.parse(fleet.moment))}
          />
          <Anomalies fleet={fleet} />
        </div>
      )}
      <NodeTable params={url.searchParams} version={tableVersion} />
    </>
  );
}
