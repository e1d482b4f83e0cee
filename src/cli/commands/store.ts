import { ConvergeError } from '../../core/errors.ts';
import { summarizeStats } from '../../store/storeStats.ts';
import type { StoreStats } from '../../store/storeStats.ts';
import type { Run } from '../command.ts';
import { withStore } from '../command.ts';
import { printOne, progress, table } from '../output.ts';

// `converge store stats` (docs/operations.md "What the store holds"): the store's events and their
// stored bytes by event type and by age (the time each event carries, against now), the totals, and
// where it keeps them: a SQLite file and its WAL, a PostgreSQL table.

const ageNames = { day: 'last day', week: '1-7 days', month: '7-30 days', older: 'older' } as const;

const n = (x: number): string => x.toLocaleString('en-US');
/** Bytes for people: 1,234,567 B (1.2 MiB). */
function size(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = -1;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u < 0 ? `${n(bytes)} B` : `${n(bytes)} B (${v.toFixed(1)} ${units[u]})`;
}

type Archived = Readonly<{ segments: number; events: number; bytes: number; rawBytes: number }> | null;

function report(kind: string, now: Date, stats: StoreStats, archive: Archived) {
  const s = summarizeStats(stats.cells);
  return {
    archive,
    store: kind,
    now: now.toISOString(),
    events: s.events,
    bytes: s.bytes,
    byType: s.byType,
    byAge: s.byAge,
    storage: stats.storage,
  };
}

function text(r: ReturnType<typeof report>): string {
  const share = (b: number): string => (r.bytes === 0 ? '-' : `${((b / r.bytes) * 100).toFixed(1)}%`);
  const lines = [
    `${r.store} store: ${n(r.events)} events, ${size(r.bytes)} of event data and metadata\n`,
    ...r.storage.map((f) => `${f.kind === 'file' ? 'file' : 'table'} ${f.name}: ${size(f.bytes)}\n`),
    r.archive === null || r.archive.segments === 0
      ? ''
      : `archived: ${n(r.archive.events)} events in ${n(r.archive.segments)} segment(s), ${size(r.archive.bytes)} compressed (${size(r.archive.rawBytes)} uncompressed), not counted above\n`,
    '\n',
    table(
      ['TYPE', 'EVENTS', 'BYTES', 'SHARE'],
      r.byType.map((t) => [t.type, n(t.events), n(t.bytes), share(t.bytes)]),
    ),
    '\n',
    table(
      ['AGE', 'EVENTS', 'BYTES', 'SHARE'],
      r.byAge.map((a) => [ageNames[a.age], n(a.events), n(a.bytes), share(a.bytes)]),
    ),
  ];
  return lines.join('');
}

export const run: Run = async (ctx) => {
  const { io, positionals, config, output } = ctx;
  if (positionals[0] === 'archive') return (await import('./storeArchive.ts')).runArchive(ctx);
  if (positionals[0] !== 'stats')
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `store: unknown subcommand ${JSON.stringify(positionals[0] ?? '')} (converge store stats, converge store archive)`,
    );
  return withStore(
    config,
    io,
    async (store) => {
      if (store.stats === undefined) {
        throw new ConvergeError(
          'CONVERGE_ERR_USAGE',
          `store stats is not supported for an ${store.kind} store: it would read the whole log over the network (use the server's own tools)`,
        );
      }
      const now = new Date();
      const p = progress(io, 'store stats: positions');
      const stats = await store.stats({ now, onProgress: (at, head) => p.update(Number(at), Number(head)) });
      p.done();
      // The manifest's figures: the segments are counted as they were written, not read again.
      const manifest = (await store.archiveManifest?.()) ?? null;
      const archived: Archived =
        manifest === null
          ? null
          : manifest.segments.reduce(
              (a, s) => ({
                segments: a.segments + 1,
                events: a.events + s.events,
                bytes: a.bytes + s.bytes,
                rawBytes: a.rawBytes + s.rawBytes,
              }),
              {
                segments: 0,
                events: 0,
                bytes: 0,
                rawBytes: 0,
              },
            );
      const r = report(store.kind, now, stats, archived);
      printOne(io, output, r, { name: store.kind, text: () => text(r) });
      return 0;
    },
    'hot',
  );
};
