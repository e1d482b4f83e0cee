import { parseAt, timeline } from '../../../projections/index.ts';
import type { At } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import { readNodeStream, readNodeStreamAsOf } from '../../readModel/queries.ts';
import type { Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
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
  return withStore(config, io, async (store) => {
    // To `--to`, the history as it stood then: the archive's segments past it are not read. Every
    // event before `--from` is: each entry is classified by the fold from the stream's first event.
    const events = to === null ? await readNodeStream(store, node) : await readNodeStreamAsOf(store, node, to);
    const t = timeline(node, events);
    const windowed = from === null ? t.entries : t.entries.filter((e) => !before(e, from));
    const entries = limit === Infinity ? windowed : windowed.slice(-limit);
    // With --limit or --from, the declarations those events name (sent, or reported on), not every one ever sent.
    const named = new Set(entries.map((e) => e.digest));
    const declarations = limit === Infinity && from === null ? t.declarations : t.declarations.filter((d) => named.has(d.digest));
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
  });
};

/** `--from` / `--to`: an ISO 8601 time or a store position; null when not given. */
function moment(flag: string, value: unknown): At | null {
  if (value === undefined) return null;
  const at = typeof value === 'string' ? parseAt(value) : null;
  if (at === null)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--${flag} ${JSON.stringify(value)} is neither an ISO 8601 time nor a decimal position`);
  return at;
}

/** An entry before `from`: recorded before its time, or stored before its position. */
const before = (e: Readonly<{ at: string; position: bigint }>, from: At): boolean =>
  from.kind === 'time' ? Date.parse(e.at) < from.time : e.position < from.position;
