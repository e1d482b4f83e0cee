import { createRaceScanner } from '../../../projections/index.ts';
import type { Race } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Recorded } from '../../core/events/index.ts';
import { streamPrefix } from '../../core/events/index.ts';
import { readNodeStream } from '../../readModel/queries.ts';
import type { Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { printList, progress, short } from '../output.ts';

export const run: Run = ({ io, values, positionals, config, output }) => {
  if (positionals[0] !== 'races')
    throw new ConvergeError('CONVERGE_ERR_USAGE', `unknown forensics report ${JSON.stringify(positionals[0])}; try: forensics races`);
  const node = typeof values.node === 'string' ? nodeArgument(values.node) : null;
  return withStore(config, io, async (store) => {
    const scanner = createRaceScanner();
    const races: Race[] = [];
    const scan = (events: Iterable<Recorded>): void => {
      for (const e of events) {
        const r = scanner.push(e);
        if (r !== null) races.push(r);
      }
    };
    if (node !== null) {
      // One node: its own stream, and one that never existed is not found, as in status.
      scan(await readNodeStream(store, node));
    } else {
      const head = await store.headPosition();
      const p = progress(io, 'scanning');
      for await (const batch of store.readAll({ streamPrefix })) {
        scan(batch);
        const last = batch[batch.length - 1];
        if (last !== undefined) p.update(Number(last.position), head === null ? null : Number(head));
      }
      p.done();
    }
    printList(io, output, races, {
      headers: ['NODE', 'POSITION', 'RECEIVED', 'REPORTED', 'CURRENT (SENT AT)', 'CLASS'],
      row: (r) => [
        r.node,
        r.position.toString(),
        r.receivedAt,
        r.reportDigest === null ? '(none)' : `${r.reportSerial ?? '?'}:${short(r.reportDigest)}`,
        `${r.currentSerial}:${short(r.currentDigest)} (${r.sentAt})`,
        r.class,
      ],
      wide: {
        headers: [
          'NODE',
          'POSITION',
          'RECEIVED',
          'REPORTED SERIAL',
          'REPORTED DIGEST',
          'CURRENT SERIAL',
          'CURRENT DIGEST',
          'SENT AT',
          'CLASS',
        ],
        row: (r) => [
          r.node,
          r.position.toString(),
          r.receivedAt,
          r.reportSerial === null ? '-' : String(r.reportSerial),
          r.reportDigest ?? '(none)',
          String(r.currentSerial),
          r.currentDigest,
          r.sentAt,
          r.class,
        ],
      },
      // A race is one report: the node and the store position that recorded it.
      name: (r) => `${r.node}@${r.position}`,
    });
    if (output !== 'text' && output !== 'wide') return 0;
    io.stderr(`${races.length} report(s) the clock rule would have counted as caught up\n`);
    return 0;
  });
};
