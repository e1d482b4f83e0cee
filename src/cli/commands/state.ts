import { nodeView, parseAt, stateAt } from '../../../projections/index.ts';
import { ConvergeError } from '../../errors.ts';
import { streamOf } from '../../events/index.ts';
import type { Command } from '../command.ts';
import { withStore } from '../command.ts';
import { printJson } from '../output.ts';
import { describeNode } from './status.ts';

export const state: Command = {
  name: 'state',
  usage: 'converge state <node> --at <ISO time|position> [--json]',
  summary: "a node's state as of a time or store position (the same fold, stopped)",
  args: [1, 1],
  options: { at: { type: 'string' } },
  run: ({ io, values, positionals, config, json }) =>
    withStore(config, io, async (store) => {
      const node = positionals[0]!;
      if (typeof values.at !== 'string') throw new ConvergeError('CONVERGE_ERR_USAGE', 'state needs --at <ISO time|position>');
      const at = parseAt(values.at);
      if (at === null)
        throw new ConvergeError(
          'CONVERGE_ERR_USAGE',
          `--at ${JSON.stringify(values.at)} is neither an ISO 8601 time nor a decimal position`,
        );
      const events = await store.readStream(streamOf(node));
      if (events.length === 0)
        throw new ConvergeError('CONVERGE_ERR_NODE_NOT_FOUND', `no event has ever named node ${JSON.stringify(node)}`);
      const r = stateAt(node, events, at);
      const moment = at.kind === 'time' ? at.time : r.lastEventAt === null ? 0 : Date.parse(r.lastEventAt);
      const v = nodeView(r.state, moment, config.graceMs);
      if (json) printJson(io, { at: values.at, folded: r.folded, state: v });
      else io.stdout(`as of ${values.at} (${r.folded} of ${events.length} events folded)\n${describeNode(v)}`);
      return 0;
    }),
};
