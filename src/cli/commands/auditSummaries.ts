import { allSummaryChecks, createSummaryCheck } from '../../core/audit/rangeSummary.ts';
import type { SummaryCheck, SummaryToCheck } from '../../core/audit/rangeSummary.ts';
import { createSummaryBackfill } from '../../core/audit/summaryBackfill.ts';
import type { ArchivedStore } from '../../store/archive/withArchive.ts';

// What `audit verify`'s walk of every leaf does with the archive segments' summaries of their leaf
// ranges (docs/audit.md "Proofs without the whole log"): it checks the headers' and, where it
// differs, the copy the store keeps (which export reads), and it makes the summary of every segment
// the store keeps none for, from the leaves it checks, to be written once the log is found intact.
// The back-fill runs here because this walk is the one that reads every leaf in position order
// anyway, and what it writes comes from leaves just checked against the stored head.

export type ArchiveSummaryWalk = Readonly<{
  /** Fed every leaf by verifyLog; undefined when there is nothing to check or make. */
  check: SummaryCheck | undefined;
  /** After an intact walk: write the summaries made; how many. */
  record: () => Promise<number>;
}>;

export async function archiveSummaryWalk(store: ArchivedStore): Promise<ArchiveSummaryWalk> {
  const { archive } = store;
  const own = (file: string): readonly bigint[] => archive.positions(file);
  const headers = archive.summaries();
  const stored = (await store.archiveSummaries?.()) ?? new Map<string, SummaryToCheck['summary']>();
  const kept = storedToCheck(store, stored);
  const pending = new Set(store.manifest.segments.filter((s) => typeof stored.get(s.file) !== 'object').map((s) => s.file));
  const order = pending.size === 0 || store.recordArchiveSummaries === undefined ? null : await store.archiveSegmentsInOrder?.();
  const to = new Map(store.manifest.segments.map((s) => [s.file, s.to]));
  const backfill =
    order === null || order === undefined
      ? null
      : createSummaryBackfill(
          order.flatMap((name) => (to.has(name) ? [{ name, to: to.get(name)! }] : [])),
          pending,
          own,
        );
  const checks = [
    ...(headers.length === 0 ? [] : [['', createSummaryCheck(headers, own)] as const]),
    ...(kept.length === 0 ? [] : [["the store's copy of its summary", createSummaryCheck(kept, own)] as const]),
    ...(backfill === null ? [] : [['', backfill] as const]),
  ];
  return {
    check: checks.length === 0 ? undefined : allSummaryChecks(checks),
    record: async () => {
      const made = backfill?.made() ?? new Map();
      if (made.size > 0) await store.recordArchiveSummaries!(made);
      return made.size;
    },
  };
}

/**
 * The summaries the store keeps that export would read and the check of the headers' does not
 * already cover: those that differ from their segment's header, or whose header has none.
 */
function storedToCheck(store: ArchivedStore, stored: ReadonlyMap<string, SummaryToCheck['summary']>): SummaryToCheck[] {
  return store.manifest.segments.flatMap((s) => {
    const summary = stored.get(s.file);
    if (summary === undefined) return [];
    const header = store.archive.summaryOf(s.file);
    if (header !== null && JSON.stringify(header) === JSON.stringify(summary)) return [];
    return [{ name: s.file, from: s.from, to: s.to, summary }];
  });
}
