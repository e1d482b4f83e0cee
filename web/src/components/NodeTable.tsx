import { useEffect, useMemo, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import type { NodeFilter } from '../api/client.ts';
import type { LivenessState, NodeStatus, NodeView } from '../api/types.ts';
import { livenesses, statuses } from '../api/types.ts';
import { duration, markOnce, shortDigest, time } from '../format.ts';
import { useLoad } from '../hooks.ts';
import { nodeHref, setQuery } from '../router.ts';
import { LivenessBadge, StatusBadge } from './badges.tsx';

// The node table: filters and paging run in the API (GET /v1/nodes, cursor-paged by
// node id), so a page costs the same at 100 nodes or 100,000. Sorting by another column orders
// the page on screen; across pages the order is the node id.

type SortKey = 'node' | 'status' | 'liveness' | 'latency' | 'seen';
const sortLabels: Readonly<Record<SortKey, string>> = {
  node: 'Node',
  status: 'Status',
  liveness: 'Liveness',
  latency: 'Last latency',
  seen: 'Last seen',
};

const rank = (v: NodeView, key: SortKey): string | number => {
  switch (key) {
    case 'node':
      return v.node;
    case 'status':
      return statuses.indexOf(v.status);
    case 'liveness':
      return livenesses.indexOf(v.liveness.state) * 1e15 + v.liveness.disconnectedForMs;
    case 'latency':
      return v.convergence.lastLatencyMs ?? -1;
    case 'seen':
      return v.liveness.lastSeenAt ?? '';
  }
};

export type NodeTableProps = Readonly<{ params: URLSearchParams; version: number }>;

export function NodeTable({ params, version }: NodeTableProps) {
  const filter: NodeFilter = {
    status: (params.get('status') as NodeStatus | null) ?? undefined,
    liveness: (params.get('liveness') as LivenessState | null) ?? undefined,
    spec: params.get('spec') ?? undefined,
    digest: params.get('digest') ?? undefined,
    prefix: params.get('prefix') ?? undefined,
  };
  const filterKey = JSON.stringify(filter);
  const [limit, setLimit] = useState(50);
  // Cursor stack: the `after` of each page shown so far (null: the first page).
  const [cursors, setCursors] = useState<{ key: string; stack: (string | null)[] }>({ key: filterKey, stack: [null] });
  const stack = cursors.key === filterKey ? cursors.stack : [null];
  const after = stack[stack.length - 1] ?? null;
  const page = useLoad(`${filterKey}|${after}|${limit}|${version}`, (signal) => api.nodes(filter, { limit, after }, signal));
  const [sort, setSort] = useState<{ key: SortKey; dir: 1 | -1 }>({ key: 'node', dir: 1 });
  const [prefixText, setPrefixText] = useState(filter.prefix ?? '');

  const rows = useMemo(() => {
    const list = [...(page.data?.nodes ?? [])];
    list.sort((a, b) => {
      const x = rank(a, sort.key);
      const y = rank(b, sort.key);
      return (x < y ? -1 : x > y ? 1 : a.node < b.node ? -1 : 1) * sort.dir;
    });
    return list;
  }, [page.data, sort]);

  const data = page.data;
  useEffect(() => {
    if (data !== null) markOnce('converge:node-table');
  }, [data !== null]);
  const first = (stack.length - 1) * limit + 1;
  const header = (key: SortKey) => (
    <th scope="col" aria-sort={sort.key === key ? (sort.dir === 1 ? 'ascending' : 'descending') : 'none'}>
      <button type="button" class="sort" onClick={() => setSort((s) => ({ key, dir: s.key === key ? (-s.dir as 1 | -1) : 1 }))}>
        {sortLabels[key]}
        <span aria-hidden="true">{sort.key === key ? (sort.dir === 1 ? ' ▲' : ' ▼') : ' ↕'}</span>
      </button>
    </th>
  );

  return (
    <section aria-labelledby="nodes-h" class="card">
      <h2 id="nodes-h">Nodes</h2>
      <form
        class="filters"
        aria-label="Filter nodes"
        onSubmit={(e) => {
          e.preventDefault();
          setQuery({ prefix: prefixText.trim() });
        }}
      >
        <label>
          Status{' '}
          <select value={filter.status ?? ''} onChange={(e) => setQuery({ status: (e.currentTarget as HTMLSelectElement).value })}>
            <option value="">any</option>
            {statuses.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Liveness{' '}
          <select value={filter.liveness ?? ''} onChange={(e) => setQuery({ liveness: (e.currentTarget as HTMLSelectElement).value })}>
            <option value="">any</option>
            {livenesses.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Id starts with{' '}
          <input
            type="search"
            value={prefixText}
            placeholder="node-01"
            onInput={(e) => setPrefixText((e.currentTarget as HTMLInputElement).value)}
          />
        </label>
        <button type="submit">Search</button>
        {(filter.spec !== undefined || filter.digest !== undefined) && (
          <span class="chip" title={filter.spec ?? filter.digest}>
            {filter.spec !== undefined ? `spec ${shortDigest(filter.spec)}` : `digest ${shortDigest(filter.digest)}`}{' '}
            <button type="button" aria-label="Remove the digest filter" onClick={() => setQuery({ spec: null, digest: null })}>
              ✕
            </button>
          </span>
        )}
        <label>
          Per page{' '}
          <select value={String(limit)} onChange={(e) => setLimit(Number((e.currentTarget as HTMLSelectElement).value))}>
            {[25, 50, 100, 500].map((n) => (
              <option value={String(n)}>{n}</option>
            ))}
          </select>
        </label>
      </form>
      {page.error !== null && <p class="error">Could not load nodes: {page.error.message}</p>}
      <div class="table-wrap">
        <table class="nodes" aria-busy={page.loading}>
          <caption>
            {data === null
              ? 'Loading…'
              : data.total === 0
                ? 'No node matches.'
                : `Nodes ${first.toLocaleString('en-US')}–${(first + data.count - 1).toLocaleString('en-US')} of ${data.total.toLocaleString('en-US')}`}
            <span class="muted"> · in node id order across pages; a column heading sorts this page</span>
          </caption>
          <thead>
            <tr>
              {header('node')}
              {header('status')}
              <th scope="col">Sent</th>
              <th scope="col">Reported</th>
              {header('liveness')}
              {header('latency')}
              <th scope="col">Anomalies</th>
              {header('seen')}
            </tr>
          </thead>
          <tbody>
            {rows.map((v) => (
              <tr key={v.node} data-node={v.node}>
                <th scope="row">
                  <a href={nodeHref(v.node)}>{v.node}</a>
                </th>
                <td>
                  <StatusBadge status={v.status} />
                </td>
                <td>
                  {v.sent === null ? (
                    '—'
                  ) : (
                    <span title={`declaration ${v.sent.digest}, spec ${v.sent.specDigest}`}>
                      #{v.sent.serial} <code>{shortDigest(v.sent.specDigest)}</code>
                    </span>
                  )}
                </td>
                <td>{v.reported === null ? '—' : <span title={v.reported.declared ?? 'no digest'}>{v.reported.class}</span>}</td>
                <td>
                  <LivenessBadge liveness={v.liveness} />
                </td>
                <td class="num">{duration(v.convergence.lastLatencyMs)}</td>
                <td class="num">
                  {v.anomalies.stale + v.anomalies.unknown + v.anomalies.undeclared === 0
                    ? '—'
                    : `${v.anomalies.stale} stale · ${v.anomalies.unknown} unknown · ${v.anomalies.undeclared} undeclared`}
                </td>
                <td>{time(v.liveness.lastSeenAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <nav class="pager" aria-label="Node pages">
        <button type="button" disabled={stack.length <= 1} onClick={() => setCursors({ key: filterKey, stack: stack.slice(0, -1) })}>
          ← Previous
        </button>
        <span>Page {stack.length}</span>
        <button
          type="button"
          disabled={data === null || data.next === null}
          onClick={() => data?.next != null && setCursors({ key: filterKey, stack: [...stack, data.next] })}
        >
          Next →
        </button>
      </nav>
    </section>
  );
}
