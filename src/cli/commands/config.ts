import { settingSources } from '../../app/configFile.ts';
import type { SettingShown } from '../../app/configFile.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { printList } from '../output.ts';

// `converge config view` (docs/operations.md "Configuration"): each setting with the value a
// command would read and its source — a flag, a variable, the --config file, the command's own
// default, or the default — with tokens and URL passwords masked. It checks nothing: a command
// checks the settings it uses when it runs.

export const run: Run = async ({ io, values, positionals, output, file = {}, overrides = {} }) => {
  const [verb] = positionals as [string];
  if (verb !== 'view') throw new ConvergeError('CONVERGE_ERR_USAGE', `config takes view, not ${JSON.stringify(verb)}`);
  printList(io, output, settingSources({ flags: values, env: io.env, file }, overrides), {
    headers: ['SETTING', 'VALUE', 'SOURCE', 'VARIABLE'],
    row: (s: SettingShown) => [s.setting, s.value ?? '(none)', s.source, s.env],
    name: (s) => s.setting,
  });
  return 0;
};
