import { failureDetail } from '../core/rollout/index.ts';
import type { Lookup, RolloutNode, RolloutNodesPage, RolloutNodesQuery, Tracked } from './rolloutViewTypes.ts';

// A rollout's targets in wave order with how each stands (GET /v1/rollouts/:id/nodes), in pages.

function describe(r: Tracked, index: number, wave: number, { entryOf, nodeOf }: Lookup): RolloutNode | null {
  const node = r.state.targets[index];
  if (node === undefined) return null;
  const entry = entryOf(r, node);
  const state = nodeOf(node);
  const outcome = entry?.outcome ?? 'unsent';
  const send = entry?.send;
  return {
    node,
    wave,
    outcome,
    serial: send?.serial ?? null,
    digest: send?.digest ?? null,
    sentAt: send?.sentAt ?? null,
    detail: outcome === 'done' ? null : outcome === 'unsent' ? 'not sent yet' : failureDetail(outcome, state, entry?.skip),
  };
}

export function nodesPage(r: Tracked, q: RolloutNodesQuery, lookup: Lookup): RolloutNodesPage {
  const { entryOf } = lookup;
  const out: RolloutNode[] = [];
  let total = 0;
  let more = false;
  let lastIndex = -1;
  for (const w of r.state.waves) {
    if (q.wave !== undefined && w.wave !== q.wave) continue;
    for (let i = w.from; i < w.to && i < r.state.targets.length; i++) {
      const outcome = entryOf(r, r.state.targets[i]!)?.outcome ?? 'unsent';
      if (q.outcome !== undefined && outcome !== q.outcome) continue;
      total++;
      if (q.after !== undefined && i <= q.after) continue;
      if (out.length < q.limit) {
        const d = describe(r, i, w.wave, lookup);
        if (d !== null) out.push(d);
        lastIndex = i;
      } else more = true;
    }
  }
  return { rollout: r.state.id, nodes: out, total, next: more && lastIndex >= 0 ? lastIndex : null };
}
