import { createRaceScanner } from '../../../projections/index.ts';
import type { Race } from '../../../projections/index.ts';
import { ConvergeError } from '../../errors.ts';
import type { Command } from '../command.ts';
import { withStore } from '../command.ts';
import { printJsonLines, progress, short, table } from '../output.ts';

export const forensics: Command = {
  name: 'forensics',
  usage: 'converge forensics races [--node <id>] [--json]',
  summary: 'reports the old clock rule counted as caught up and the digest rule does not',
  args: [1, 1],
  options: { node: { type: 'string' } },
  run: ({ io, values, positionals, config, json }) => {
    if (positionals[0] !== 'races')
      throw new ConvergeError('CONVERGE_ERR_USAGE', `unknown forensics report ${JSON.stringify(positionals[0])}; try: forensics races`);
    return withStore(config, io, async (store) => {
      const head = await store.headPosition();
      const scanner = createRaceScanner();
      const races: Race[] = [];
      const p = progress(io, 'scanning');
      for await (const batch of store.readAll({ streamPrefix: 'node-' })) {
        for (const e of batch) {
          if (values.node !== undefined && e.data.node !== values.node) continue;
          const r = scanner.push(e);
          if (r !== null) races.push(r);
        }
        const last = batch[batch.length - 1];
        if (last !== undefined) p.update(Number(last.position), head === null ? null : Number(head));
      }
      p.done();
      if (json) {
        printJsonLines(io, races);
        return 0;
      }
      io.stdout(
        table(
          ['NODE', 'POSITION', 'RECEIVED', 'REPORTED', 'CURRENT (SENT AT)', 'CLASS'],
          races.map((r) => [
            r.node,
            r.position.toString(),
            r.receivedAt,
            r.reportDigest === null ? '(none)' : `${r.reportSerial ?? '?'}:${short(r.reportDigest)}`,
            `${r.currentSerial}:${short(r.currentDigest)} (${r.sentAt})`,
            r.class,
          ]),
        ),
      );
      io.stderr(`${races.length} report(s) the clock rule would have counted as caught up\n`);
      return 0;
    });
  },
};
