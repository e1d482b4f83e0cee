import { parseAt } from '../../../projections/index.ts';
import { ConvergeError } from '../../errors.ts';
import { stateAsOf } from '../../readModel/queries.ts';
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
      const r = await stateAsOf(store, node, at, config.graceMs);
      const v = r.state;
      if (json) printJson(io, { at: values.at, folded: r.folded, state: v });
      else io.stdout(`as of ${values.at} (${r.folded} of ${r.total} events folded)\n${describeNode(v)}`);
      return 0;
    }),
};
