import { ConvergeError } from '../../core/errors.ts';
import { stateAsOf } from '../../readModel/queries.ts';
import type { Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { printOne } from '../output.ts';
import { asOfText, momentFlag } from '../moment.ts';
import { describeNode } from './describeNode.ts';

export const run: Run = ({ io, values, positionals, config, output }) => {
  const node = nodeArgument(positionals[0]!);
  if (typeof values.at !== 'string') throw new ConvergeError('CONVERGE_ERR_USAGE', 'state needs --at <ISO time|position>');
  const at = momentFlag('at', values.at);
  const text = values.at;
  return withStore(config, io, async (store) => {
    const r = await stateAsOf(store, node, at, config.graceMs);
    const v = r.state;
    printOne(
      io,
      output,
      { at: values.at, folded: r.folded, state: v },
      { text: () => `as of ${asOfText(text, at)} (${r.folded} of ${r.total} events folded)\n${describeNode(v)}`, name: v.node },
    );
    return 0;
  });
};
