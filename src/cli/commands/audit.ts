import { verifyLog } from '../../core/audit/verifyLog.ts';
import type { VerifyResult } from '../../core/audit/verifyLog.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { withStore } from '../command.ts';
import type { CliIo } from '../io.ts';
import { printJson } from '../output.ts';

// `converge audit verify` (docs/audit.md#verifying-a-store): the log checked against itself. Exit
// 0: every stored event matches the leaf hash the store wrote beside it and the tree over them is
// the stored head; 1: the first place it does not, by kind; 2: a usage mistake, or the store could
// not be read (nothing was checked, so nothing is claimed either way).

const exitIntact = 0;
const exitTampered = 1;
const exitCannotCheck = 2;

/** A line on stderr now and then: on a terminal, rewritten in place; with --progress elsewhere, a line each time. */
function progressLine(io: CliIo, forced: boolean): { update: (n: number, total: bigint) => void; done: () => void } {
  if (!io.stderrIsTTY && !forced) return { update: () => {}, done: () => {} };
  let last = 0;
  const started = Date.now();
  return {
    update(n, total) {
      const t = Date.now();
      if (t - last < 1_000) return;
      last = t;
      const rate = Math.round(n / Math.max(0.001, (t - started) / 1000));
      const text = `audit verify: ${n.toLocaleString('en-US')} / ${total.toLocaleString('en-US')} events, ${rate.toLocaleString('en-US')}/s`;
      io.stderr(io.stderrIsTTY ? `\r${text}\u001b[K` : `${text}\n`);
    },
    done: () => {
      if (io.stderrIsTTY) io.stderr('\r\u001b[K');
    },
  };
}

function print(io: CliIo, json: boolean, storeKind: string, kept: boolean, r: VerifyResult): void {
  const out = {
    store: storeKind,
    intact: r.finding === null,
    events: r.events,
    head: { size: r.head.size.toString(), root: r.head.root, keptByStore: kept },
    root: r.root,
    finding: r.finding === null ? null : { kind: r.finding.kind, position: r.finding.position.toString(), message: r.finding.message },
  };
  if (json) return printJson(io, out);
  if (r.finding !== null) {
    io.stdout(`TAMPERED at position ${r.finding.position} (${r.finding.kind}): ${r.finding.message}\n`);
    io.stdout(`checked ${r.events.toLocaleString('en-US')} events before it; stored head: ${r.head.size} events, root ${r.head.root}\n`);
    return;
  }
  io.stdout(`intact: ${r.events.toLocaleString('en-US')} events, root ${r.root}\n`);
  if (!kept) {
    io.stdout(
      `note: this ${storeKind} store keeps no tree of its own; the head above was computed from the log as it is now, so it shows no change made before. Keep it (or a signed checkpoint of it) elsewhere and compare later.\n`,
    );
  }
}

export const run: Run = async ({ io, positionals, values, config, json }) => {
  if (positionals[0] !== 'verify') {
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `audit: unknown subcommand ${JSON.stringify(positionals[0] ?? '')} (converge audit verify)`,
    );
  }
  try {
    return await withStore(config, io, async (store) => {
      const first = await store.auditHead();
      const p = progressLine(io, values.progress === true);
      let total = first.size;
      const result = await verifyLog(
        {
          head: async () => {
            const h = await store.auditHead();
            total = h.size;
            return h;
          },
          read: (after, limit) => store.readStored({ after, limit }),
        },
        { onProgress: (n) => p.update(n, total) },
      );
      p.done();
      print(io, json, store.kind, first.keptByStore, result);
      return result.finding === null ? exitIntact : exitTampered;
    });
  } catch (err) {
    if (!(err instanceof ConvergeError) || err.code === 'CONVERGE_ERR_USAGE') throw err;
    io.stderr(`converge: audit verify could not read the store, nothing was checked: ${err.message}\n`);
    return exitCannotCheck;
  }
};
