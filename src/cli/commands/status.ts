import { livenessStates, nodeStatuses, nodeView } from '../../../projections/index.ts';
import type { NodeView } from '../../../projections/index.ts';
import { ConvergeError } from '../../errors.ts';
import type { Command } from '../command.ts';
import { withStore } from '../command.ts';
import { pairs, printJson, printJsonLines, short, table } from '../output.ts';
import { currentNode } from '../../readModel/queries.ts';
import { foldStore } from './readModelFromStore.ts';

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

export function describeNode(v: NodeView): string {
  return pairs([
    ['node', v.node],
    ['status', `${v.status}${v.caughtUp ? ' (caught up)' : ''}`],
    ['liveness', `${v.liveness.state}${v.liveness.lastSeenAt === null ? '' : `, last seen ${v.liveness.lastSeenAt}`}`],
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
    ['position', v.position],
  ]);
}

export const status: Command = {
  name: 'status',
  usage: 'converge status [node] [--status <s>] [--liveness <l>] [--json]',
  summary: 'node states folded from the store (all nodes, or one)',
  args: [0, 1],
  options: { status: { type: 'string' }, liveness: { type: 'string' } },
  run: ({ io, values, positionals, config, json }) => {
    // The fold's own lists (the API's enums are built from them): a filter no node can match is a typo, not an empty fleet.
    for (const [flag, allowed] of [
      ['status', nodeStatuses],
      ['liveness', livenessStates],
    ] as const) {
      const v = values[flag];
      if (v !== undefined && !(allowed as readonly unknown[]).includes(v)) {
        throw new ConvergeError('CONVERGE_ERR_USAGE', `--${flag} must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
      }
    }
    return withStore(config, io, async (store) => {
      const now = Date.now();
      const node = positionals[0];
      if (node !== undefined) {
        // One node: its own stream, not the whole store.
        const v = await currentNode(store, node, now, config.graceMs);
        if (json) printJson(io, v);
        else io.stdout(describeNode(v));
        return 0;
      }
      const states = await foldStore(store, io);
      const views = [...states.values()]
        .map((s) => nodeView(s, now, config.graceMs))
        .filter(
          (v) =>
            (values.status === undefined || v.status === values.status) &&
            (values.liveness === undefined || v.liveness.state === values.liveness),
        )
        .sort((a, b) => (a.node < b.node ? -1 : 1));
      if (json) printJsonLines(io, views);
      else io.stdout(table(nodeHeaders, views.map(nodeRow)));
      return 0;
    });
  },
};
