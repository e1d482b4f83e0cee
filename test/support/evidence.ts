import { parseAt } from '../../projections/index.ts';
import type { KeyObject } from 'node:crypto';
import { buildEvidence, newestCheckpoint } from '../../src/readModel/evidence/build.ts';
import type { EvidenceBundle } from '../../src/core/audit/evidenceFormat.ts';
import type { ArchivedStore } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';

// One node's evidence bundle as `converge audit export` builds it, for the tests and the bench that
// hold a bundle read one way to the bundle read another, and the forged-evidence scenario.

export type BundleOptions = Readonly<{
  /** The audit public key (--audit-pub); without it the latest checkpoint's key is followed. */
  auditKey?: KeyObject | null;
  /** Proven against the store's head when no checkpoint covers the events (--unsigned). */
  unsigned?: boolean;
  /** The bundle's exportedAt (ms). */
  now?: number;
}>;

/** `node`'s bundle as of `moment` (a time, a position, or `checkpoint`, as `--at` takes it). */
export const evidenceBundle = (store: EventStore, node: string, moment: string, o: BundleOptions = {}): Promise<EvidenceBundle> =>
  buildEvidence(store, {
    node,
    // `--at checkpoint` is made a position once the store is open, as the CLI does.
    at: moment === newestCheckpoint ? { kind: 'position', position: 0n } : parseAt(moment)!,
    atText: moment,
    from: null,
    graceMs: 60_000,
    auditKey: o.auditKey ?? null,
    declarationKey: null,
    unsigned: o.unsigned ?? false,
    now: () => o.now ?? 0,
  });

/** `node`'s bundle as of `moment` with no key, proven against the store's head (`--unsigned`). */
export const unsignedBundle = (store: EventStore, node: string, moment: string): Promise<EvidenceBundle> =>
  evidenceBundle(store, node, moment, { unsigned: true });

/** The same archived store with its segments' summaries ignored: export walks every leaf, as over segments archived without them. */
export const withoutSummaries = (store: ArchivedStore): ArchivedStore => ({
  ...withoutStoredSummaries(store),
  archive: { ...store.archive, summaries: () => [], summaryOf: () => null },
});

/** The same archived store with the summaries its store keeps ignored: export reads each segment's header for its summary, as over segments the release before archived. */
export function withoutStoredSummaries(store: ArchivedStore): ArchivedStore {
  const { archiveSummaries: _, ...rest } = store;
  return rest;
}
