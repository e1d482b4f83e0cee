import { ConvergeError } from '../../core/errors.ts';
import type { Recorded } from '../../core/events/index.ts';
import { streamPrefix as archivedStreamPrefix } from '../../core/events/index.ts';
import type { ArchiveManifest, EventStore, ReadAllOptions, ReadStreamOptions } from '../port.ts';
import { boundStore } from './boundStore.ts';

// A store whose history was archived, read without its archive (no --archive-dir): the hot rows
// alone would give another answer for any read that needs an archived event (a report classed
// against a send that is no longer there, a fold that starts at the kept rows), and an evidence
// walk a root that looks like tampering. So such a read refuses, naming what was moved
// (docs/operations.md "Retention and archive", "Reads without the archive"). The rule, per read:
// - a node stream read whose revisions the hot store answers with a gap (the stream's revisions
//   count from 0 with none; an archived event leaves one) refuses; a stream with nothing archived,
//   or a read of its newest events above the archived ones, answers;
// - a read of the whole log (readAll, readColumns, readStored, a subscription) that starts at or
//   below the last archived position refuses, unless it names only streams that are never archived.

/** The one refusal of a read that needs archived events: `audit verify`'s, and every past read's. */
export function archiveNeeded(manifest: ArchiveManifest, what: string, so = 'they are read too'): ConvergeError {
  const events = manifest.segments.reduce((n, s) => n + s.events, 0);
  return new ConvergeError(
    'CONVERGE_ERR_ARCHIVE_NEEDED',
    `${what}: the store moved ${events.toLocaleString('en-US')} events to ${manifest.segments.length} archive segment(s); give --archive-dir <dir> so ${so}`,
    { details: { events, segments: manifest.segments.length } },
  );
}

/** The store's manifest when it lists segments, else null (nothing archived, or a store that does not archive). */
export async function archivedManifest(store: EventStore): Promise<ArchiveManifest | null> {
  const manifest = (await store.archiveManifest?.()) ?? null;
  return manifest === null || manifest.segments.length === 0 ? null : manifest;
}

/** Refuse a read that folds the whole log from zero (`replay --verify`) before it starts, unless `store` reads its archive. */
export async function mustReadArchive(store: EventStore, what: string): Promise<void> {
  if ('archive' in store) return;
  const manifest = await archivedManifest(store);
  if (manifest !== null) throw archiveNeeded(manifest, what);
}

/** `store` itself when nothing is archived, else `store` with every read that needs an archived event refused. */
export async function withoutArchive(store: EventStore): Promise<EventStore> {
  const manifest = await archivedManifest(store);
  return manifest === null ? store : refusingArchived(store, manifest);
}

/** `store`, its reads of archived history refused (the rule above); its writes and other reads are the store's. */
export function refusingArchived(store: EventStore, manifest: ArchiveManifest): EventStore {
  const lastArchived = manifest.segments.reduce((m, s) => (s.to > m ? s.to : m), -1n);
  const mayHoldArchived = (prefix: string | undefined): boolean =>
    prefix === undefined || prefix.startsWith(archivedStreamPrefix) || archivedStreamPrefix.startsWith(prefix);
  const below = (after: bigint | null | undefined, prefix?: string): boolean => (after ?? -1n) < lastArchived && mayHoldArchived(prefix);
  const fromZero = (after: bigint | null | undefined): string =>
    after === null || after === undefined ? 'reading the log from its start' : `reading the log after position ${after}`;

  async function readStream(stream: string, opts: ReadStreamOptions = {}): Promise<readonly Recorded[]> {
    const events = await store.readStream(stream, opts);
    if (stream.startsWith(archivedStreamPrefix) && hasGap(events, opts)) throw archiveNeeded(manifest, `reading ${stream}`);
    return events;
  }

  async function* readAll(opts: ReadAllOptions = {}): AsyncIterable<readonly Recorded[]> {
    if (below(opts.after, opts.streamPrefix)) throw archiveNeeded(manifest, fromZero(opts.after));
    yield* store.readAll(opts);
  }

  const refusing: EventStore = {
    ...boundStore(store),
    readStream,
    readAll,
    readColumns: async function* (opts = {}) {
      if (below(opts.after, opts.streamPrefix)) throw archiveNeeded(manifest, fromZero(opts.after));
      yield* store.readColumns(opts);
    },
    readStored: async (opts = {}) => {
      if (below(opts.after)) throw archiveNeeded(manifest, fromZero(opts.after));
      return store.readStored(opts);
    },
    subscribe: (opts) => {
      // A named checkpoint resumes where it saved, above the archive for the engine's own; the rest start at `after`.
      if (opts.checkpoint === undefined && below(opts.after)) throw archiveNeeded(manifest, fromZero(opts.after));
      return store.subscribe(opts);
    },
  };
  return refusing;
}

/** Do the revisions the hot store gave skip one the read asked for (an archived event)? */
function hasGap(events: readonly Recorded[], opts: ReadStreamOptions): boolean {
  if (events.length === 0) return false;
  if (opts.direction === 'backwards') {
    // The stream's last event is always kept hot, so a read from the end starts at it; a later
    // page starts one below the page before.
    let expected = opts.fromRevision ?? events[0]!.revision;
    for (const e of events) {
      if (e.revision !== expected) return true;
      expected--;
    }
    // Short of its limit, the read went down to revision 0.
    return (opts.limit === undefined || events.length < opts.limit) && expected !== -1n;
  }
  let expected = opts.fromRevision ?? 0n;
  for (const e of events) {
    if (e.revision !== expected) return true;
    expected++;
  }
  return false;
}
