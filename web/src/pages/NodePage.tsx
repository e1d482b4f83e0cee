import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, api } from '../api/client.ts';
import type { NodeView, TimelineEntry } from '../api/types.ts';
import { EvidenceButton } from '../components/EvidenceButton.tsx';
import { NodeStatePanel } from '../components/NodeState.tsx';
import { HoldBadges } from '../components/badges.tsx';
import { SendForm } from '../components/SendForm.tsx';
import { StreamIndicator } from '../components/StreamIndicator.tsx';
import { TimelineList } from '../components/TimelineList.tsx';
import { TimeTravel } from '../components/TimeTravel.tsx';
import { count, time } from '../format.ts';
import { useEvents, useLoad, useThrottle } from '../hooks.ts';
import { setQuery } from '../router.ts';
import { Problemish } from './common.tsx';

// One node: its state now (live from /v1/events?node=) or as of a moment
// (GET …/state?at=), and its timeline, newest first, paged back as far as it goes.

const pageSize = 50;

export function NodePage({ node, url }: { node: string; url: URL }) {
  const at = url.searchParams.get('at');
  const [tick, setTick] = useState(0);
  const current = useLoad(`node:${node}`, (signal) => api.node(node, signal));
  const [live, setLive] = useState<NodeView | null>(null);
  useEffect(() => setLive(null), [node]);
  const first = useLoad(`tl:${node}:${tick}`, (signal) => api.timeline(node, null, pageSize, signal));
  const [older, setOlder] = useState<{ node: string; entries: TimelineEntry[]; next: string | null } | null>(null);
  const asOf = useLoad(at === null ? null : `at:${node}:${at}`, (signal) => api.stateAt(node, at!, signal));
  const refresh = useThrottle(() => setTick((t) => t + 1), 500);
  const stream = useEvents(node, (v) => {
    if (v.node !== node) return;
    setLive(v);
    refresh();
  });

  const entries = useMemo(() => {
    const byPosition = new Map<string, TimelineEntry>();
    for (const e of first.data?.entries ?? []) byPosition.set(e.position, e);
    if (older !== null && older.node === node) for (const e of older.entries) byPosition.set(e.position, e);
    return [...byPosition.values()].sort((a, b) => (BigInt(b.position) > BigInt(a.position) ? 1 : -1));
  }, [first.data, older, node]);
  const next = older !== null && older.node === node ? older.next : (first.data?.next ?? null);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const stops = useMemo(() => entries.map((e) => e.position).reverse(), [entries]);

  const state = live ?? current.data;
  const notFound = current.error instanceof ApiError && current.error.status === 404;
  return (
    <>
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href="/">Fleet</a> <span aria-hidden="true">›</span> <span aria-current="page">{node}</span>
      </nav>
      <div class="page-head">
        <h1>
          Node <code>{node}</code>
        </h1>
        <HoldBadges node={state} />
        <StreamIndicator status={stream} />
      </div>
      {notFound ? (
        <p class="error" role="alert">
          No event has ever named node <code>{node}</code>.
        </p>
      ) : current.error !== null && state === null ? (
        <Problemish error={current.error} what={`node ${node}`} />
      ) : null}
      {!notFound && (
        <>
          <TimeTravel
            id="node-tt"
            stops={stops}
            at={at}
            onChange={(a) => setQuery({ at: a })}
            shownMoment={at !== null && !/^\d+$/.test(at) ? at : null}
            shownPosition={asOf.data?.state.position ?? null}
            busy={asOf.loading}
          />
          {at !== null ? (
            asOf.error !== null ? (
              <Problemish error={asOf.error} what={`node ${node} as of ${at}`} />
            ) : asOf.data === null ? (
              <p aria-busy="true">Folding the node's events up to {at}…</p>
            ) : (
              <NodeStatePanel
                state={asOf.data.state}
                title={`As of ${/^\d+$/.test(at) ? `position ${at}` : time(at)} (${count(asOf.data.folded)} events folded)`}
              />
            )
          ) : state === null ? (
            <p aria-busy="true">Loading…</p>
          ) : (
            <NodeStatePanel state={state} title="Now" />
          )}
          {/* The moment shown: the time-travel position or time, else the node's latest position. */}
          {(at ?? state?.position) !== undefined && <EvidenceButton node={node} at={(at ?? state?.position)!} />}
          <section class="card" aria-labelledby="tl-h">
            <h2 id="tl-h">Timeline</h2>
            <p class="muted">
              Every event of this node, newest first{first.data !== null ? ` (${count(first.data.events)} in all)` : ''}. A{' '}
              <strong>race</strong> is a report the old clock rule would have counted as caught up.
            </p>
            {first.error !== null && <Problemish error={first.error} what="the timeline" />}
            <TimelineList entries={entries} asOf={at} onAsOf={(p) => setQuery({ at: p })} />
            {next !== null && (
              <button
                type="button"
                disabled={loadingOlder}
                onClick={() => {
                  setLoadingOlder(true);
                  api
                    .timeline(node, next, pageSize)
                    .then((t) =>
                      setOlder((o) => ({
                        node,
                        entries: [...(o !== null && o.node === node ? o.entries : []), ...t.entries],
                        next: t.next,
                      })),
                    )
                    .catch(() => undefined)
                    .finally(() => setLoadingOlder(false));
                }}
              >
                Load older events
              </button>
            )}
          </section>
          <SendForm node={node} />
        </>
      )}
    </>
  );
}
