import type { NodeOutcome, Rollout, RolloutStatus, WaveCounts } from '../api/types.ts';
import type { Part } from './StackedBar.tsx';

// Rollouts as the dashboard shows them: a glyph and a word beside every colour, as for
// node statuses.

export const rolloutGlyph: Readonly<Record<RolloutStatus, string>> = {
  running: '▶',
  paused: '❚❚',
  halted: '■',
  completed: '✓',
  aborted: '✕',
  rollingBack: '↶',
  rolledBack: '↺',
};

export const outcomeGlyph: Readonly<Record<NodeOutcome, string>> = {
  done: '✓',
  pending: '…',
  refused: '✕',
  degraded: '!',
  unsendable: '⊘',
  superseded: '↷',
  skipped: '⏸',
  unsent: '◌',
};

export const outcomeMeaning: Readonly<Record<NodeOutcome, string>> = {
  done: 'its latest report names the digest this rollout sent it, and it is converged',
  pending: 'sent; its latest report does not name our digest yet (a stale report leaves it here)',
  refused: 'it reported our digest and refused it',
  degraded: 'it reported our digest with a resource failed or missing',
  unsendable: 'the spec assigns a port it carries: never sent',
  superseded: 'a newer declaration reached it from elsewhere before it read ours',
  skipped: 'held or pinned when its wave was sent: not sent, no failure',
  unsent: 'not sent yet',
};

/** The CSS class of an outcome reuses the node statuses' colours. */
export const outcomeClass: Readonly<Record<NodeOutcome, string>> = {
  done: 'status-converged',
  pending: 'status-behind',
  refused: 'status-refused',
  degraded: 'status-degraded',
  unsendable: 'status-refused',
  superseded: 'status-undeclared',
  skipped: 'status-undeclared',
  unsent: 'status-undeclared',
};

export function RolloutBadge({ status }: { status: RolloutStatus }) {
  return (
    <span class={`badge rollout-${status}`} data-rollout-status={status}>
      <span aria-hidden="true">{rolloutGlyph[status]}</span> {status}
    </span>
  );
}

export function OutcomeBadge({ outcome }: { outcome: NodeOutcome }) {
  return (
    <span class={`badge ${outcomeClass[outcome]}`} title={outcomeMeaning[outcome]} data-outcome={outcome}>
      <span aria-hidden="true">{outcomeGlyph[outcome]}</span> {outcome}
    </span>
  );
}

export function waveParts(w: WaveCounts, href?: (o: NodeOutcome) => string): Part[] {
  const list: [NodeOutcome, number][] = [
    ['done', w.done],
    ['pending', w.pending],
    ['refused', w.refused],
    ['degraded', w.degraded],
    ['unsendable', w.unsendable],
    ['superseded', w.superseded],
    ['unsent', w.unsent],
  ];
  return list.map(([o, value]) => ({
    key: o,
    label: o,
    value,
    glyph: outcomeGlyph[o],
    className: outcomeClass[o],
    ...(href === undefined ? {} : { href: href(o) }),
  }));
}

/** Where a rollout is, in a few words. */
export const waveText = (r: Rollout): string => (r.current === 0 ? 'no wave open yet' : `wave ${r.current} of ${r.waves.length}`);
