import { rolloutStatuses } from '../../core/rollout/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { withStore } from '../command.ts';
import { printList } from '../output.ts';
import { foldRollouts } from './rolloutViewFromStore.ts';
import { rolloutHeaders, rolloutRow } from './rolloutText.ts';

// `converge rollouts [--status s]`: every rollout, newest first, as the API lists them.
export const run: Run = ({ io, values, config, output }) => {
  const wanted = values.status;
  if (wanted !== undefined && !(rolloutStatuses as readonly unknown[]).includes(wanted))
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--status must be one of ${rolloutStatuses.join(', ')}, got ${JSON.stringify(wanted)}`);
  return withStore(config, io, async (store) => {
    const { rollouts } = await foldRollouts(store, io, config, null);
    const now = Date.now();
    const shown = rollouts
      .list()
      .filter((r) => wanted === undefined || r.status === wanted)
      .flatMap((r) => rollouts.summary(r.id, now) ?? []);
    printList(io, output, shown, { headers: rolloutHeaders, row: rolloutRow, name: (r) => r.rollout });
    return 0;
  });
};
