import { timeline, timelineWindow } from '../../../projections/index.ts';
import type { At, WindowAnswer } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import { readNodeStream, readNodeStreamAsOf, readNodeWindow } from '../../readModel/queries.ts';
import type { Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { momentFlag, orderedWindow } from '../moment.ts';
import { printList, short, table } from '../output.ts';

export const run: Run = ({ io, values, positionals, config, output }) => {
  const node = nodeArgument(positionals[0]!);
  // slice(-0) and slice(-(-n)) would show everything or the wrong end: only n ≥ 1 means "the latest n".
  if (values.limit !== undefined && !(typeof values.limit === 'string' && /^[1-9]\d*$/.test(values.limit))) {
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--limit must be a whole number ≥ 1, got ${JSON.stringify(values.limit)}`);
  }
  const limit = values.limit === undefined ? Infinity : Number(values.limit);
  const from = moment('from', values.from);
  const to = moment('to', values.to);
  if (from !== null && to !== null) orderedWindow({ text: values.from as string, at: from }, { text: values.to as string, at: to });
  return withStore(config, io, async (store) => {
    // To `--to`, the history as it stood then: the archive's segments past it are not read. From
    // `--from`, the segments before it are read only as far back as the classification needs.
    if (from !== null) {
      const w = { from, to, limit };
      return show(timelineWindow(node, await readNodeWindow(store, node, w), w));
    }
    const events = to === null ? await readNodeStream(store, node) : await readNodeStreamAsOf(store, node, to);
    const t = timeline(node, events);
    if (limit === Infinity) return show(t);
    // With --limit, the declarations those events name (sent, or reported on), not every one ever sent.
    const entries = t.entries.slice(-limit);
    const named = new Set(entries.map((e) => e.digest));
    return show({ entries, declarations: t.declarations.filter((d) => named.has(d.digest)) });
  });

  function show({ entries, declarations }: WindowAnswer): number {
    // -o wide: the digests whole.
    const digest = output === 'wide' ? (d: string | null): string => d ?? '-' : short;
    printList(io, output, entries, {
      headers: ['POSITION', 'AT', 'EVENT', 'SERIAL', 'DIGEST', 'CLASS', 'STATUS AFTER'],
      row: (e) => [
        e.position.toString(),
        e.at,
        e.type,
        e.serial === null ? '-' : String(e.serial),
        digest(e.digest),
        e.class === null ? '-' : `${e.class}${e.duplicate ? ' (dup)' : ''}`,
        e.status,
      ],
      name: (e) => e.position.toString(),
      value: (e) => ({ node, ...e }),
    });
    if (output !== 'text' && output !== 'wide') return 0;
    io.stdout('\n');
    io.stdout(
      table(
        ['SERIAL', 'DIGEST', 'SENT', 'OUTCOME', 'LATENCY'],
        declarations.map((d) => [
          String(d.serial),
          digest(d.digest),
          d.sentAt,
          d.outcome,
          d.latencyMs === null ? '-' : `${d.latencyMs} ms`,
        ]),
      ),
    );
    return 0;
  }
};

/** `--from` / `--to`: an ISO 8601 time or a store position; null when not given. */
function moment(flag: string, value: unknown): At | null {
  if (value === undefined) return null;
  if (typeof value !== 'string') throw new ConvergeError('CONVERGE_ERR_USAGE', `--${flag} needs a time or a position`);
  return momentFlag(flag, value);
}
