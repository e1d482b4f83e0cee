import { setImmediate as nextTurn } from 'node:timers/promises';
import { join } from 'node:path';
import type { ArchiveManifest } from '../port.ts';
import { SegmentError, readSegmentFile } from './segment.ts';
import type { ArchivedRow } from './segment.ts';

/**
 * The rows of a segment the manifest lists, read whole and checked against its manifest row and
 * the store's identity (null for a file the manifest does not list): what each back-fill of
 * segments archived before a schema step reads, on either store.
 */
export function listedSegmentRows(dir: string, manifest: ArchiveManifest): (file: string) => readonly ArchivedRow[] | null {
  const byFile = new Map(manifest.segments.map((s) => [s.file, s]));
  return (file) => {
    const s = byFile.get(file);
    if (s === undefined) return null;
    const d = readSegmentFile(join(dir, file), file, { sha256: s.sha256, count: s.events });
    if (d.header.store !== manifest.store)
      throw new SegmentError(file, 'changed', `it names store ${d.header.store}, not ${manifest.store}`);
    return d.rows;
  };
}

/**
 * A record some segments lack, because they were archived before it existed (or by a release that
 * does not write it): which files lack it, and how to write it for one of them from its rows.
 */
export type SegmentBackfill = Readonly<{
  pending: ReadonlySet<string>;
  record: (file: string, rows: readonly ArchivedRow[]) => void | Promise<void>;
}>;

/**
 * Write every back-fill's record for the segments that lack it, in manifest order, reading each
 * such segment once however many back-fills need it; each record is its own write, so a run that
 * dies leaves the rest for the next, and the event loop runs between segments. Returns, per
 * back-fill, the files it wrote.
 */
export async function backfillSegments(dir: string, manifest: ArchiveManifest, fills: readonly SegmentBackfill[]): Promise<string[][]> {
  const rowsOf = listedSegmentRows(dir, manifest);
  const done = fills.map((): string[] => []);
  const ordered = [...manifest.segments].sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
  for (const { file } of ordered) {
    const need = fills.map((f) => f.pending.has(file));
    if (!need.includes(true)) continue;
    const rows = rowsOf(file);
    if (rows === null) continue;
    for (const [i, fill] of fills.entries()) {
      if (!need[i]) continue;
      await fill.record(file, rows);
      done[i]!.push(file);
    }
    await nextTurn();
  }
  return done;
}
