import { timeline } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import { readNodeStream } from '../../readModel/queries.ts';
import type { Run } from '../command.ts';
import { nodeArgument, withStore } from '../command.ts';
import { printJsonLines, short, table } from '../output.ts';

export const run: Run = ({ io, values, positionals, config, json }) => {
  const node = nodeArgument(positionals[0]!);
  // slice(-0) and slice(-(-n)) would show everything or the wrong end: only n ≥ 1 means "the latest n".
  if (values.limit !== undefined && !(typeof values.limit === 'string' && /^[1-9]\d*$/.test(values.limit))) {
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--limit must be a whole number ≥ 1, got ${JSON.stringify(values.limit)}`);
  }
  const limit = values.limit === undefined ? Infinity : Number(values.limit);
  return withStore(config, io, async (store) => {
    const events = await readNodeStream(store, node);
    const t = timeline(node, events);
    const entries = limit === Infinity ? t.entries : t.entries.slice(-limit);
    // With --limit, the declarations those events name (sent, or reported on), not every one ever sent.
    const named = new Set(entries.map((e) => e.digest));
    const declarations = limit === Infinity ? t.declarations : t.declarations.filter((d) => named.has(d.digest));
    if (json) {
      printJsonLines(
        io,
        entries.map((e) => ({ node, ...e })),
      );
      return 0;
    }
    io.stdout(
      table(
        ['POSITION', 'AT', 'EVENT', 'SERIAL', 'DIGEST', 'CLASS', 'STATUS AFTER'],
        entries.map((e) => [
          e.position.toString(),
          e.at,
          e.type,
          e.serial === null ? '-' : String(e.serial),
          short(e.digest),
          e.class === null ? '-' : `${e.class}${e.duplicate ? ' (dup)' : ''}`,
          e.status,
        ]),
      ),
    );
    io.stdout('\n');
    io.stdout(
      table(
        ['SERIAL', 'DIGEST', 'SENT', 'OUTCOME', 'LATENCY'],
        declarations.map((d) => [String(d.serial), short(d.digest), d.sentAt, d.outcome, d.latencyMs === null ? '-' : `${d.latencyMs} ms`]),
      ),
    );
    return 0;
  });
};
