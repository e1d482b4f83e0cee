import { parseAt } from '../../projections/index.ts';
import { buildEvidence } from '../../src/readModel/evidence/build.ts';
import type { EvidenceBundle } from '../../src/core/audit/evidenceFormat.ts';
import type { ArchivedStore } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';

// One node's evidence bundle as `converge audit export --unsigned` builds it, with no key, for the
// tests and the bench that hold a bundle read through an archive to the bundle read another way.

/** `node`'s bundle as of `moment` (a time or a position, as `--at` takes it), proven against the store's head. */
export const unsignedBundle = (store: EventStore, node: string, moment: string): Promise<EvidenceBundle> =>
  buildEvidence(store, {
    node,
    at: parseAt(moment)!,
    atText: moment,
    from: null,
    graceMs: 60_000,
    auditKey: null,
    declarationKey: null,
    unsigned: true,
    now: () => 0,
  });

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
