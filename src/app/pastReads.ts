import type { ArchivedStore } from '../store/archive/withArchive.ts';
import type { EventStore } from '../store/index.ts';

// The API's reads of the past — a node's state as of a moment, its history, its timeline, an
// evidence bundle, a send's `asOf` — over the archive as well when serve has `--archive-dir`
// (docs/operations.md "Retention and archive"), so a move changes no answer. The merged view is
// made again when the store's manifest names another last segment (retention archived while the
// engine runs), and not at all while nothing is archived. Without `--archive-dir`, a past read
// that needs archived events refuses (503 CONVERGE_ERR_ARCHIVE_NEEDED, withoutArchive.ts) rather
// than answer from the rows kept hot. Everything else reads the hot store.

/** What the API's past reads use: `store` itself, or `store` with its archive merged in. */
export type PastReads = () => Promise<EventStore>;

export function pastReadsOf(store: EventStore, archiveDir: string | null): PastReads {
  if (store.archiveManifest === undefined) return () => Promise.resolve(store);
  if (archiveDir === null) return withoutArchiveDir(store);
  let view: { key: string; store: Promise<ArchivedStore> } | null = null;
  return async () => {
    const manifest = await store.archiveManifest!();
    const last = manifest.segments.at(-1);
    if (last === undefined) return store;
    // Time ranges an archive run filled in for older segments count too: a view with them skips more.
    const key = `${manifest.segments.length}:${last.to}:${manifest.segments.filter((s) => s.minTime !== undefined).length}`;
    if (view === null || view.key !== key) {
      // The block tables the last view read are kept: a segment archived since does not make every read cold again.
      const previous = view?.store.then((v) => v.archive).catch(() => undefined);
      const made = import('../store/archive/withArchive.ts').then(async (m) => {
        const before = await previous;
        return m.withArchive(store, archiveDir, before === undefined ? {} : { previous: before });
      });
      view = { key, store: made };
      made.catch(() => {
        if (view?.store === made) view = null;
      });
    }
    return view.store;
  };
}

/** Past reads with no archive: the store, its reads of archived history refused once its manifest lists a segment. */
function withoutArchiveDir(store: EventStore): PastReads {
  // Another process may archive (store archive) while serve runs: the manifest is read each time, as above.
  let view: { key: string; store: EventStore } | null = null;
  return async () => {
    const manifest = await store.archiveManifest!();
    const last = manifest.segments.at(-1);
    if (last === undefined) return store;
    const key = `${manifest.segments.length}:${last.to}`;
    if (view === null || view.key !== key) {
      const { refusingArchived } = await import('../store/archive/withoutArchive.ts');
      view = { key, store: refusingArchived(store, manifest) };
    }
    return view.store;
  };
}
