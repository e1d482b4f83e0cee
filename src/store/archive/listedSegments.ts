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
