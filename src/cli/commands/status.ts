import { holdOf, isObserved, livenessStates, nodeStatuses, nodeView } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { printList, printOne } from '../output.ts';
import { currentNode, readObservedSpans } from '../../readModel/queries.ts';
import { describeNode, nodeHeaders, nodeRow, nodeWideHeaders, nodeWideRow } from './describeNode.ts';
import { foldStore } from './readModelFromStore.ts';

export const run: Run = ({ io, values, positionals, config, output }) => {
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
  const node = positionals[0] === undefined ? undefined : nodeArgument(positionals[0]);
  return withStore(config, io, async (store) => {
    const now = Date.now();
    if (node !== undefined) {
      // One node: its own stream, not the whole store.
      // Its hold and pin beside the fold's view, as the API answers them (docs/design.md §8 "Holds and pins").
      const { createHoldsReader } = await import('../../engine/holds.ts');
      const v = { ...(await currentNode(store, node, now, config.graceMs)), ...holdOf(await createHoldsReader(store).refresh(), node) };
      printOne(io, output, v, { text: () => describeNode(v), name: v.node });
      return 0;
    }
    const states = await foldStore(store, io);
    // With no engine observing now (the last one stopped), the record cannot say connected or not:
    // as `state <node> --at <now>` and `status <node>` say (docs/design.md §3 "Not observed").
    const observed = isObserved(await readObservedSpans(store), now);
    // A retired node is out of the fleet's listing (docs/design.md §3 "Retired nodes"); `status <node>` still shows it.
    const views = [...states.values()]
      .filter((s) => s.retiredAt === null)
      .map((s) =>
        nodeView(s, now, config.graceMs, observed ? undefined : { state: 'not-observed', lastSeenAt: s.lastSeenAt, disconnectedForMs: 0 }),
      )
      .filter(
        (v) =>
          (values.status === undefined || v.status === values.status) &&
          (values.liveness === undefined || v.liveness.state === values.liveness),
      )
      .sort((a, b) => (a.node < b.node ? -1 : 1));
    printList(io, output, views, {
      headers: nodeHeaders,
      row: nodeRow,
      wide: { headers: nodeWideHeaders, row: nodeWideRow },
      name: (v) => v.node,
    });
    return 0;
  });
};
