import type { KeyObject } from 'node:crypto';
import { resolve } from 'node:path';
import { checkLoggedCheckpoints, checkWitness } from '../../core/audit/checkpointCheck.ts';
import type { LoggedCheck, LoggedCheckpoint, WitnessCheck, WitnessEntry } from '../../core/audit/checkpointCheck.ts';
import { verifyLog } from '../../core/audit/verifyLog.ts';
import { pooledCheckedPages } from '../../store/audit/verifyPool.ts';
import type { VerifyResult } from '../../core/audit/verifyLog.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { ArchivedStore } from '../../store/archive/withArchive.ts';
import { archiveNeeded, archivedManifest } from '../../store/archive/withoutArchive.ts';
import { archiveSummaryWalk } from './auditSummaries.ts';
import type { ArchiveSummaryWalk } from './auditSummaries.ts';
import type { EventStore } from '../../store/port.ts';
import type { Run } from '../command.ts';
import { storeUrlOf, withStore } from '../command.ts';
import type { CliIo } from '../io.ts';
import { printJson } from '../output.ts';
import { loggedCheckpoints, readAuditPub, threadsOf, witnessEntries } from './auditSources.ts';

// `converge audit verify` (docs/audit.md#verifying-a-store): the log checked against itself and
// its checkpoints (docs/audit.md#checkpoints-and-witnesses). Exit 0: every stored event matches the
// leaf hash the store wrote beside it, the tree over them is the stored head, and every checkpoint
// in the log is the tree's at its size (and signed by the audit key, with --audit-pub); 1: the
// first place it is not, by kind; 2: a usage mistake, or the store could not be read (nothing was
// checked, so nothing is claimed either way); 3 (--witness): the log is consistent in itself, but
// the witness holds a checkpoint its tree does not reproduce: the log was rewritten.

const exitIntact = 0;
const exitTampered = 1;
const exitCannotCheck = 2;
const exitWitnessContradicts = 3;

type Checks = Readonly<{
  logged: LoggedCheck | null;
  loggedTotal: number;
  signaturesChecked: boolean;
  witness: WitnessCheck | null;
  witnessTotal: number;
}>;

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

function print(io: CliIo, json: boolean, storeKind: string, kept: boolean, r: VerifyResult, checks: Checks, filled: number): void {
  const lf = checks.logged?.finding ?? null;
  const wf = checks.witness?.finding ?? null;
  const out = {
    store: storeKind,
    intact: r.finding === null && lf === null && wf === null,
    events: r.events,
    head: { size: r.head.size.toString(), root: r.head.root, keptByStore: kept },
    root: r.root,
    finding:
      r.finding === null
        ? null
        : {
            kind: r.finding.kind,
            position: r.finding.position.toString(),
            ...(r.finding.to === undefined ? {} : { to: r.finding.to.toString(), segment: r.finding.segment }),
            message: r.finding.message,
          },
    checkpoints: {
      inLog: checks.loggedTotal,
      checked: checks.logged?.checked ?? 0,
      signaturesChecked: checks.signaturesChecked,
      finding: lf === null ? null : { ...lf, position: lf.position.toString() },
    },
    ...(checks.witness === null ? {} : { witness: { files: checks.witnessTotal, checked: checks.witness.checked, finding: wf } }),
    ...(filled === 0 ? {} : { summariesWritten: filled }),
  };
  if (json) return printJson(io, out);
  if (r.finding?.kind === 'summary') {
    io.stdout(`TAMPERED archive summary at positions ${r.finding.position}-${r.finding.to}: ${r.finding.message}\n`);
    io.stdout(`checked ${r.events.toLocaleString('en-US')} events before it; stored head: ${r.head.size} events, root ${r.head.root}\n`);
    return;
  }
  if (r.finding !== null) {
    io.stdout(`TAMPERED at position ${r.finding.position} (${r.finding.kind}): ${r.finding.message}\n`);
    io.stdout(`checked ${r.events.toLocaleString('en-US')} events before it; stored head: ${r.head.size} events, root ${r.head.root}\n`);
    return;
  }
  if (lf !== null) io.stdout(`BAD CHECKPOINT at position ${lf.position} (${lf.kind}): ${lf.message}\n`);
  if (wf !== null) {
    const sig =
      wf.signatureValid === null
        ? 'its signature was not checked'
        : wf.signatureValid
          ? 'it is signed by the audit key'
          : 'it is not signed by the audit key given';
    io.stdout(`WITNESS CONTRADICTS the log at size ${wf.size} (${wf.kind}): ${wf.message}; ${sig}\n`);
  }
  if (lf !== null || wf !== null) return;
  io.stdout(`intact: ${r.events.toLocaleString('en-US')} events, root ${r.root}\n`);
  const sigs = checks.signaturesChecked ? 'signatures valid' : 'signatures not checked (no --audit-pub)';
  io.stdout(`checkpoints: ${checks.logged?.checked ?? 0} in the log match the tree, ${sigs}\n`);
  if (checks.witness !== null) io.stdout(`witness: ${checks.witness.checked} checkpoints, every one reproduced by the log\n`);
  if (filled > 0)
    io.stdout(`summaries: ${filled} archive segment(s) had none in the store; written from the leaves checked, for export to read\n`);
  if (!kept) {
    io.stdout(
      `note: this ${storeKind} store keeps no tree of its own; the head above was computed from the log as it is now, so it shows no change made before. Keep it (or a signed checkpoint of it) elsewhere and compare later.\n`,
    );
  }
}

export const run: Run = async (ctx) => {
  const { io, positionals, values, config, json } = ctx;
  // Evidence bundles (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge) live in files of their own.
  if (positionals[0] === 'export') return (await import('./auditExport.ts')).runExport(ctx);
  if (positionals[0] === 'check') return (await import('./auditCheck.ts')).runCheck(ctx);
  if (positionals[0] !== 'verify' || positionals.length > 1) {
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `audit: unknown subcommand ${JSON.stringify(positionals.join(' '))} (converge audit verify | export <node> | check <bundle>)`,
    );
  }
  const pub = typeof values['audit-pub'] === 'string' ? readAuditPub(resolve(io.cwd, values['audit-pub'])) : null;
  const witness = typeof values.witness === 'string' ? witnessEntries(resolve(io.cwd, values.witness)) : null;
  const threads = threadsOf(values.threads);
  try {
    return await withStore(config, io, async (store) => {
      // Archived history is walked first, from its segments; a segment gone or changed is
      // reported before the walk (docs/operations.md "Retention and archive").
      const broken = await checkArchive(store);
      if (broken.length > 0) {
        printArchiveProblems(io, json, store.kind, broken);
        return exitTampered;
      }
      const first = await store.auditHead();
      const logged = await loggedCheckpoints(store);
      const p = progressLine(io, values.progress === true);
      let total = first.size;
      const rootsAt = new Set([...logged, ...(witness ?? [])].map((c) => c.signed.checkpoint.size));
      const read = (after: bigint | null, limit: number) => store.readStored({ after, limit });
      // Stores another thread can open on its own read and check on every core (verifyPool.ts);
      // the threads open the hot store alone, so archived history is walked on this thread.
      const pooled = threads > 1 && (store.kind === 'sqlite' || store.kind === 'postgres') && !('archive' in store);
      const last = pooled ? await store.headPosition() : null;
      // Each segment's summary of its leaf range, checked against the leaves as the walk passes it.
      const archive = 'archive' in store ? (store as ArchivedStore).archive : null;
      const summaryWalk = archive === null ? null : await archiveSummaryWalk(store as ArchivedStore);
      const result = await verifyLog(
        {
          head: async () => {
            const h = await store.auditHead();
            total = h.size;
            return h;
          },
          read,
          ...(pooled ? { checkedPages: () => pooledCheckedPages({ url: storeUrlOf(config, io), last, readTail: read, threads }) } : {}),
        },
        {
          onProgress: (n) => p.update(n, total),
          rootsAt,
          ...(summaryWalk?.check === undefined ? {} : { summaries: summaryWalk.check }),
        },
      );
      p.done();
      const checks = checkpointChecks(result, logged, witness, pub);
      // The summaries made for segments the store kept none for, from leaves the walk found intact.
      const filled = result.finding === null && summaryWalk !== null ? await recordSummaries(io, summaryWalk) : 0;
      print(io, json, store.kind, first.keptByStore, result, checks, filled);
      if (result.finding !== null || checks.logged?.finding) return exitTampered;
      return checks.witness?.finding ? exitWitnessContradicts : exitIntact;
    });
  } catch (err) {
    if (!(err instanceof ConvergeError) || err.code === 'CONVERGE_ERR_USAGE' || err.code === 'CONVERGE_ERR_ARCHIVE_NEEDED') throw err;
    io.stderr(`converge: audit verify could not read the store, nothing was checked: ${err.message}\n`);
    return exitCannotCheck;
  }
};

/** Write the back-filled summaries; a store that refuses the write (a read-only role) is noted, the verdict stands. */
async function recordSummaries(io: CliIo, walk: ArchiveSummaryWalk): Promise<number> {
  try {
    return await walk.record();
  } catch (err) {
    io.stderr(`converge: audit verify could not keep the archive segments' summaries it made: ${(err as Error).message}\n`);
    return 0;
  }
}

type ArchiveProblem = Readonly<{ file: string; from: bigint; to: bigint; events: number; problem: string; message: string }>;

/** The archive's segments, each read and checked against the manifest; a store with segments and no --archive-dir cannot be checked. */
async function checkArchive(store: EventStore): Promise<ArchiveProblem[]> {
  const manifest = await archivedManifest(store);
  if (manifest === null) return [];
  if (!('archive' in store)) throw archiveNeeded(manifest, 'audit verify', 'they are verified too');
  return (store as ArchivedStore).archive.check().map(({ segment: s, error }) => ({
    file: s.file,
    from: s.from,
    to: s.to,
    events: s.events,
    problem: error.problem,
    message: error.message,
  }));
}

function printArchiveProblems(io: CliIo, json: boolean, storeKind: string, problems: readonly ArchiveProblem[]): void {
  if (json) {
    printJson(io, {
      store: storeKind,
      intact: false,
      archive: problems.map((p) => ({ ...p, from: p.from.toString(), to: p.to.toString() })),
    });
    return;
  }
  for (const p of problems)
    io.stdout(`TAMPERED archive at positions ${p.from}-${p.to} (${p.problem}): segment ${p.file}, ${p.events} events: ${p.message}\n`);
}

/** The checkpoints against the tree, once the log itself verified (a tampered log is reported as that first). */
function checkpointChecks(
  r: VerifyResult,
  logged: readonly LoggedCheckpoint[],
  witness: readonly WitnessEntry[] | null,
  pub: KeyObject | null,
): Checks {
  const tree = { size: r.events, roots: r.roots };
  const intact = r.finding === null;
  const loggedCheck = intact ? checkLoggedCheckpoints(logged, tree, pub) : null;
  const witnessCheck = intact && witness !== null ? checkWitness(witness, tree, pub) : null;
  return {
    logged: loggedCheck,
    loggedTotal: logged.length,
    signaturesChecked: pub !== null,
    witness: witnessCheck,
    witnessTotal: witness?.length ?? 0,
  };
}
