import type { LivenessState, NodeStatus, NodeView, ReportClass } from '../api/types.ts';
import { duration, livenessGlyph, shortDigest, statusGlyph, statusMeaning } from '../format.ts';

// A glyph and a word beside every colour: colour is never the only signal.

export function StatusBadge({ status }: { status: NodeStatus }) {
  return (
    <span class={`badge status-${status}`} title={statusMeaning[status]} data-status={status}>
      <span aria-hidden="true">{statusGlyph[status]}</span> {status}
    </span>
  );
}

export function LivenessBadge({ liveness }: { liveness: NodeView['liveness'] }) {
  const state: LivenessState = liveness.state;
  const text =
    state === 'disconnected'
      ? `disconnected for ${duration(liveness.disconnectedForMs)}`
      : state === 'never-seen'
        ? 'never seen'
        : state === 'not-observed'
          ? 'not observed (no engine watching then)'
          : 'connected';
  return (
    <span class={`badge liveness-${state}`} data-liveness={state} title={liveness.reason}>
      <span aria-hidden="true">{livenessGlyph[state]}</span> {text}
    </span>
  );
}

/** A digest at the one length every page uses, the whole of it in the tooltip. */
export function Digest({ value, testId }: { value: string | null | undefined; testId?: string }) {
  return (
    <code title={value ?? 'no digest'} data-testid={testId}>
      {shortDigest(value)}
    </code>
  );
}

/** A hold's or a pin's badge on the node page (docs/design.md §8 "Holds and pins"), with who and why in the tooltip. */
export function HoldBadges({ node }: { node: Pick<NodeView, 'held' | 'pinned'> | null | undefined }) {
  const marks = [
    ['held', node?.held, '⏸', 'rollouts skip this node'],
    ['pinned', node?.pinned, '📌', 'this node keeps its spec: rollouts skip it, a send needs force'],
  ] as const;
  return (
    <>
      {marks.map(([kind, m, glyph, means]) =>
        m == null ? null : (
          <span
            key={kind}
            class={`badge hold-${kind}`}
            data-testid={`node-${kind}`}
            title={`${kind} since ${m.at} by ${m.by}${m.reason === '' ? '' : ` (${m.reason})`}: ${means}`}
          >
            <span aria-hidden="true">{glyph}</span> {kind}
          </span>
        ),
      )}
    </>
  );
}

export function ClassBadge({ cls }: { cls: ReportClass }) {
  const glyph = cls === 'matching' ? '=' : cls === 'stale' ? '⟲' : cls === 'unknown' ? '?' : '∅';
  return (
    <span class={`badge class-${cls}`}>
      <span aria-hidden="true">{glyph}</span> {cls}
    </span>
  );
}
