import type { RolloutSelection } from '../events/index.ts';
import type { NodeFacts } from './state.ts';

// Planning: which nodes, in which waves, with which budget.

export type WavePlan = Readonly<{ asGiven: string; cumulative: readonly number[] }>;

/**
 * `1,10%,50%,100%`: each step is how many of the targets have been reached by the end of that
 * wave, as a count or a percentage (rounded up, so 10% of 5 nodes is 1). Steps that add no node
 * are dropped, and the last wave always reaches every target.
 */
export function planWaves(text: string, targets: number): WavePlan | string {
  const steps = text.split(',').map((x) => x.trim());
  if (steps.length === 0 || steps.some((x) => x === ''))
    return `waves must be counts or percentages separated by commas, like 1,10%,50%,100%`;
  const cumulative: number[] = [];
  for (const step of steps) {
    const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(step);
    if (m === null) return `wave ${JSON.stringify(step)} is not a count or a percentage (like 5 or 10%)`;
    const v = Number(m[1]);
    const n = m[2] === '%' ? Math.ceil((Math.min(v, 100) / 100) * targets) : Math.floor(v);
    if (m[2] === '%' && v > 100) return `wave ${JSON.stringify(step)} is over 100%`;
    const upTo = Math.min(n, targets);
    if (upTo > (cumulative.at(-1) ?? 0)) cumulative.push(upTo);
  }
  if ((cumulative.at(-1) ?? 0) < targets) cumulative.push(targets);
  return { asGiven: text, cumulative };
}

/** `3` or `5%` (of the targets, rounded down): failures beyond it halt the rollout. */
export function planBudget(text: string, targets: number): number | string {
  const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(text.trim());
  if (m === null) return `max failures ${JSON.stringify(text)} is not a count or a percentage (like 0, 3 or 5%)`;
  const v = Number(m[1]);
  if (m[2] === '%') return v > 100 ? `max failures ${JSON.stringify(text)} is over 100%` : Math.floor((v / 100) * targets);
  return Math.floor(v);
}

/** What an operator asks for; RolloutStarted records it without the explicit list (the targets list it). */
export type TargetSelection = Exclude<RolloutSelection, { kind: 'nodes' }> | Readonly<{ kind: 'nodes'; nodes: readonly string[] }>;

/**
 * The targets, in wave order: an explicit list keeps the operator's order (the first nodes named
 * are the canaries); every other selection is taken from the node states and sorted by id, so the
 * same fleet gives the same waves.
 */
export function selectTargets(selection: TargetSelection, states: Iterable<Pick<NodeFacts, 'node' | 'sent'>>): string[] {
  if (selection.kind === 'nodes') {
    const seen = new Set<string>();
    return selection.nodes.filter((n) => !seen.has(n) && (seen.add(n), true));
  }
  const out: string[] = [];
  for (const s of states) {
    if (
      selection.kind === 'all' ||
      (selection.kind === 'spec' && s.sent?.specDigest === selection.specDigest) ||
      (selection.kind === 'prefix' && s.node.startsWith(selection.prefix))
    )
      out.push(s.node);
  }
  return out.sort();
}
