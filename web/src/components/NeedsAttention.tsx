import { api } from '../api/client.ts';
import type { NodeList, NodeView } from '../api/types.ts';
import { count, duration } from '../format.ts';
import { useLoad } from '../hooks.ts';
import { nodeHref } from '../router.ts';

// The few nodes an operator should look at first: degraded, refused, behind longest, silent
// longest. GET /v1/nodes filters but sorts by node id only, so each list is the first `sample`
// matching nodes, ordered here; when more match, "longest" is among those (the list says so).

const sample = 500;
const shown = 5;

type Kind = 'degraded' | 'refused' | 'behind' | 'silent';

const heading: Readonly<Record<Kind, string>> = {
  degraded: 'Degraded',
  refused: 'Refused',
  behind: 'Behind longest',
  silent: 'Silent longest',
};

const allHref: Readonly<Record<Kind, string>> = {
  degraded: '/?status=degraded',
  refused: '/?status=refused',
  behind: '/?status=behind',
  silent: '/?liveness=disconnected',
};

const sentAtMs = (v: NodeView): number => (v.sent === null ? Infinity : Date.parse(v.sent.sentAt));

/** The nodes to show first, and a few words on each. */
export function attentionRows(kind: Kind, nodes: readonly NodeView[], now: number): { node: string; detail: string }[] {
  const sorted =
    kind === 'silent'
      ? [...nodes].sort((a, b) => b.liveness.disconnectedForMs - a.liveness.disconnectedForMs)
      : [...nodes].sort((a, b) => sentAtMs(a) - sentAtMs(b));
  return sorted.slice(0, shown).map((v) => {
    const failed = Object.keys(v.reported?.failed ?? {});
    const detail =
      kind === 'silent'
        ? `silent for ${duration(v.liveness.disconnectedForMs)}`
        : kind === 'behind'
          ? `behind #${v.sent?.serial ?? '?'} for ${duration(now - sentAtMs(v))}`
          : kind === 'refused'
            ? v.reported?.refused || 'refused'
            : [failed.length > 0 ? `failed ${failed.join(', ')}` : '', v.missing.length > 0 ? `missing ${v.missing.join(', ')}` : '']
                .filter((x) => x !== '')
                .join('; ') || 'degraded';
    return { node: v.node, detail };
  });
}

function List({ kind, list, now }: { kind: Kind; list: NodeList; now: number }) {
  const rows = attentionRows(kind, list.nodes, now);
  return (
    <div data-testid={`attention-${kind}`}>
      <h3>
        {heading[kind]} <span class="muted">({count(list.total)})</span>
      </h3>
      {rows.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <ul>
          {rows.map((r) => (
            <li key={r.node}>
              <a href={nodeHref(r.node)}>{r.node}</a> <span class="muted">{r.detail}</span>
            </li>
          ))}
        </ul>
      )}
      {list.total > rows.length && (
        <p class="muted">
          <a href={allHref[kind]}>all {count(list.total)}</a>
          {list.total > list.count && (kind === 'behind' || kind === 'silent') ? ` (longest of the first ${count(list.count)} by id)` : ''}
        </p>
      )}
    </div>
  );
}

export function NeedsAttention({ version }: { version: number }) {
  const page = { limit: sample, after: null };
  const lists = useLoad(`attention:${version}`, (signal) =>
    Promise.all([
      api.nodes({ status: 'degraded' }, page, signal),
      api.nodes({ status: 'refused' }, page, signal),
      api.nodes({ status: 'behind' }, page, signal),
      api.nodes({ liveness: 'disconnected' }, page, signal),
    ]),
  );
  const data = lists.data;
  const now = Date.now();
  return (
    <section class="card attention" aria-labelledby="attention-h" data-testid="needs-attention">
      <h2 id="attention-h">Needs attention</h2>
      {data === null ? (
        <p class="muted">{lists.error === null ? 'Loading…' : `Could not load: ${lists.error.message}`}</p>
      ) : (
        <div class="attention-lists">
          <List kind="degraded" list={data[0]} now={now} />
          <List kind="refused" list={data[1]} now={now} />
          <List kind="behind" list={data[2]} now={now} />
          <List kind="silent" list={data[3]} now={now} />
        </div>
      )}
    </section>
  );
}
