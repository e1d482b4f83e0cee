import { resolve } from 'node:path';
import type { Config } from '../../app/config.ts';
import { minRetainMs, retainFloorMessage, retainMs } from '../../app/config.ts';
import type { ArchiveTarget } from '../../app/retention.ts';
import { ConvergeError } from '../../core/errors.ts';
import { openSnapshot } from '../../readModel/snapshot/snapshotFile.ts';
import { redactUrl } from '../../transport/amqpUrls.ts';
import type { CliIo } from '../io.ts';
import type { Context } from '../command.ts';
import { openStore, sqliteFileOf } from '../command.ts';
import { printOne, progress } from '../output.ts';

// `converge store archive --older-than 30d --archive-dir <dir>` (docs/operations.md "Retention and
// archive"): one run of the move serve --retain makes every 10 minutes, to the end: closed history
// of a SQLite or PostgreSQL store moved to compressed segments, never deleted.

const n = (x: number): string => x.toLocaleString('en-US');

/** Why a store other than SQLite and PostgreSQL is refused: said plainly, with where it is documented. */
export const archiveUnsupported = (kind: string): ConvergeError =>
  new ConvergeError(
    'CONVERGE_ERR_USAGE',
    `store archive: not supported for a ${kind} store; SQLite and PostgreSQL move closed history to an archive (docs/operations.md "Retention and archive")`,
  );

/** The configured store as the move takes it; null for a store that does not archive. */
export function archiveTargetOf(config: Config, io: CliIo): ArchiveTarget | null {
  const file = sqliteFileOf(config, io);
  if (file !== null) return { kind: 'sqlite', path: file };
  if (/^postgres(ql)?:\/\//.test(config.store)) return { kind: 'postgres', url: config.store };
  return null;
}

export async function runArchive({ io, values, config, output }: Context): Promise<number> {
  const olderThan = values['older-than'];
  if (typeof olderThan !== 'string' || !/^\d+(ms|s|m|h|d)$/.test(olderThan))
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `store archive needs --older-than <duration> (30d, 12h, 90m), got ${JSON.stringify(olderThan ?? '')}`,
    );
  if (retainMs(olderThan) < minRetainMs)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `store archive --older-than ${olderThan}: ${retainFloorMessage}`);
  if (config.archiveDir === null)
    throw new ConvergeError('CONVERGE_ERR_USAGE', 'store archive needs --archive-dir <dir> (or CONVERGE_ARCHIVE_DIR)');
  const target = archiveTargetOf(config, io);
  if (target === null) throw archiveUnsupported(config.store.split(':')[0] ?? config.store);
  // Opening it first migrates an older store to the schema with the manifest, and names a missing file.
  await (await openStore(config, io)).close();
  const snap =
    config.snapshotPath === null
      ? null
      : await openSnapshot(
          resolve(io.cwd, config.snapshotPath),
          config.snapshotFormerPath === null ? null : resolve(io.cwd, config.snapshotFormerPath),
        );
  if (snap === null)
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `store archive: no snapshot at ${config.snapshotPath ?? '(none configured)'}; only history below the latest snapshot is archived, so start-up never needs the archive. Run serve until it writes one`,
    );
  const now = Date.now();
  const before = new Date(now - retainMs(olderThan)).toISOString();
  const dir = resolve(io.cwd, config.archiveDir);
  const { archiveStore } = await import('../../app/retention.ts');
  const p = progress(io, 'store archive: positions');
  const r = await archiveStore(target, {
    dir,
    before,
    belowPosition: snap.position,
    onProgress: ({ position, upTo }) => p.update(Number(position), Number(upTo)),
  });
  p.done();
  const summary = {
    store: target.kind === 'sqlite' ? `sqlite:${target.path}` : redactUrl(target.url),
    archiveDir: dir,
    before,
    belowPosition: snap.position.toString(),
    segments: r.segments.length,
    events: r.events,
    storedBytes: r.storedBytes,
    segmentRawBytes: r.rawBytes,
    segmentBytes: r.bytes,
    files: r.segments,
    removedLeftovers: r.removedLeftovers,
  };
  printOne(io, output, summary, {
    name: dir,
    text: () =>
      [
        `archived ${n(r.events)} events recorded before ${before} and below position ${snap.position} into ${n(r.segments.length)} segment(s) in ${dir}\n`,
        `bytes: ${n(r.storedBytes)} of stored data and metadata before, ${n(r.rawBytes)} as segment lines, ${n(r.bytes)} compressed after` +
          (r.bytes > 0 ? ` (${(r.storedBytes / r.bytes).toFixed(1)}x)\n` : '\n'),
        ...r.removedLeftovers.map((f) => `removed ${f}: left by an interrupted run, its events were still in the store\n`),
      ].join(''),
  });
  return 0;
}
