import type { Logger } from 'pino';
import { isConvergeError } from '../core/errors.ts';
import { openSnapshot } from '../readModel/snapshot/snapshotFile.ts';
import type { ArchiveOptions, ArchiveSummary } from '../store/archive/archiveMove.ts';

// `serve --retain 30d --archive-dir <dir>` (docs/operations.md "Retention and archive"): the move of
// `converge store archive`, run by the engine in bounded batches, one segment of at most
// `segmentEvents` at a time with a pause between, so ingest's appends never wait long on its
// transaction; once nothing is left to move, again every `everyMs`. Only below the snapshot the
// engine itself last wrote (and checked when it read it), so a restart never needs the archive.
// On PostgreSQL each engine with --retain runs this; the store's archive lock lets one move at a
// time, and the others find it taken and try again at their next turn.

/** A store that archives: a SQLite file, or a PostgreSQL store by its URL. */
export type ArchiveTarget = Readonly<{ kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string }>;

/** One archive run on `target` (the move's module loaded only when used). */
export async function archiveStore(target: ArchiveTarget, options: ArchiveOptions): Promise<ArchiveSummary> {
  if (target.kind === 'sqlite') return (await import('../store/sqlite/sqliteArchive.ts')).archiveSqliteStore(target.path, options);
  return (await import('../store/postgres/postgresArchive.ts')).archivePostgresStore(target.url, options);
}

export type RetentionOptions = Readonly<{
  store: ArchiveTarget;
  archiveDir: string;
  retainMs: number;
  snapshotPath: string;
  logger: Logger;
  now?: () => number;
  /** Between two runs once the backlog is moved (default 10 minutes). */
  everyMs?: number;
  /** Events per segment, and so per transaction on the store (default 10,000). */
  segmentEvents?: number;
  /** Between two segments while there is a backlog (default 1 s). */
  pauseMs?: number;
}>;

export type Retention = Readonly<{
  stop: () => Promise<void>;
  /** Resolves once a run found nothing (more) to move: for tests. */ idle: () => Promise<void>;
}>;

export function startRetention(o: RetentionOptions): Retention {
  const now = o.now ?? Date.now;
  const everyMs = o.everyMs ?? 600_000;
  const pauseMs = o.pauseMs ?? 1_000;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let cursor = 0n;
  const idleWaiters: (() => void)[] = [];

  async function step(): Promise<number> {
    const snap = await openSnapshot(o.snapshotPath);
    if (snap === null) return 0;
    const r = await archiveStore(o.store, {
      dir: o.archiveDir,
      before: new Date(now() - o.retainMs).toISOString(),
      belowPosition: snap.position,
      segmentEvents: o.segmentEvents ?? 10_000,
      maxSegments: 1,
      after: cursor,
    });
    if (r.events > 0) {
      cursor = r.scannedTo;
      o.logger.info({ segment: r.segments[0], events: r.events, bytes: r.bytes, storedBytes: r.storedBytes }, 'archived closed history');
    } else cursor = 0n;
    return r.events;
  }

  const schedule = (ms: number): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = step().then(
        (moved) => {
          if (moved === 0) idleWaiters.splice(0).forEach((f) => f());
          schedule(moved > 0 ? pauseMs : everyMs);
        },
        (err: unknown) => {
          if (isConvergeError(err, 'CONVERGE_ERR_STORE_IN_USE'))
            o.logger.info({}, 'another archive run holds the store; trying again later');
          else o.logger.warn({ err }, 'archiving closed history failed; trying again later');
          schedule(everyMs);
        },
      );
    }, ms);
  };
  schedule(0);

  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      await running;
    },
    idle: () => new Promise<void>((resolve) => idleWaiters.push(resolve)),
  };
}
