import type { HoldMark, NodeView } from '../../../projections/index.ts';
import { pairs, short } from '../output.ts';

// One node's state as people read it: a row of `status`, or the key: value lines of `status <node>` and `state`.

export const nodeRow = (v: NodeView): string[] => [
  v.node,
  v.status,
  v.liveness.state === 'disconnected' ? `disconnected ${Math.round(v.liveness.disconnectedForMs / 1000)}s` : v.liveness.state,
  v.sent === null ? '-' : `${v.sent.serial}:${short(v.sent.digest)}`,
  short(v.reported?.declared),
  v.reported?.class ?? '-',
  `${v.anomalies.stale}/${v.anomalies.unknown}/${v.anomalies.undeclared}`,
];
export const nodeHeaders = ['NODE', 'STATUS', 'LIVENESS', 'SENT', 'REPORTED', 'CLASS', 'STALE/UNKNOWN/UNDECL'];

/** `-o wide`: the digests whole, when each was sent and reported, the last convergence latency. */
export const nodeWideHeaders = [
  'NODE',
  'STATUS',
  'LIVENESS',
  'LAST SEEN',
  'SERIAL',
  'SENT DIGEST',
  'SENT AT',
  'REPORTED DIGEST',
  'REPORTED AT',
  'CLASS',
  'LATENCY',
];
export const nodeWideRow = (v: NodeView): string[] => [
  v.node,
  v.status,
  v.liveness.state,
  v.liveness.lastSeenAt ?? '-',
  v.sent === null ? '-' : String(v.sent.serial),
  v.sent?.digest ?? '-',
  v.sent?.sentAt ?? '-',
  v.reported?.declared ?? '-',
  v.reported?.receivedAt ?? '-',
  v.reported?.class ?? '-',
  v.convergence.lastLatencyMs === null ? '-' : `${v.convergence.lastLatencyMs} ms`,
];

/** A hold's or a pin's line (docs/design.md §8 "Holds and pins"), when there is one. */
const markLine = (label: string, m: HoldMark | null | undefined, means: string): (readonly [string, string])[] =>
  m == null ? [] : [[label, `since ${m.at} by ${m.by}${m.reason === '' ? '' : ` (${m.reason})`}: ${means}`]];

export function describeNode(v: NodeView & Readonly<{ held?: HoldMark | null; pinned?: HoldMark | null }>): string {
  const converged = v.conditions.find((c) => c.type === 'Converged');
  return pairs([
    ['node', v.node],
    ['status', `${v.status}${v.caughtUp ? ' (caught up)' : ''}`],
    ['liveness', `${v.liveness.state}${v.liveness.lastSeenAt === null ? '' : `, last seen ${v.liveness.lastSeenAt}`}`],
    ['conditions', v.conditions.map((c) => `${c.type}=${c.status} ${c.reason}`).join(', ')],
    ['why', converged === undefined || converged.status === 'True' ? '-' : converged.message],
    ['sent', v.sent === null ? '-' : `serial ${v.sent.serial} ${v.sent.digest} at ${v.sent.sentAt}`],
    ['reported', v.reported === null ? '-' : `${v.reported.declared ?? '(no digest)'} at ${v.reported.receivedAt} (${v.reported.class})`],
    ['applied', v.reported?.applied.join(', ') || '-'],
    [
      'failed',
      Object.entries(v.reported?.failed ?? {})
        .map(([k, why]) => `${k}: ${why}`)
        .join('; ') || '-',
    ],
    ['refused', v.reported?.refused || '-'],
    ['missing', v.missing.join(', ') || '-'],
    ['carried', v.carried.join(', ') || '-'],
    ['anomalies', `stale ${v.anomalies.stale}, unknown ${v.anomalies.unknown}, undeclared ${v.anomalies.undeclared}`],
    [
      'latency',
      v.convergence.lastLatencyMs === null
        ? '-'
        : `${v.convergence.lastLatencyMs} ms (acknowledged ${v.convergence.acknowledged}, superseded ${v.convergence.superseded})`,
    ],
    ...(v.retiredAt === null ? [] : [['retired', `${v.retiredAt} (out of the fleet views; a send brings it back)`] as const]),
    ...markLine('held', v.held, 'rollouts skip it'),
    ...markLine('pinned', v.pinned, 'it keeps its spec: rollouts skip it, a send needs --force'),
    ['position', v.position],
  ]);
}
