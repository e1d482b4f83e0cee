import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { brotliCompressSync, constants as z, gzipSync } from 'node:zlib';
import { stateAsOf } from '../../src/readModel/queries.ts';
import { openSegment, readSegmentFile, rowLine } from '../../src/store/archive/segment.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

// bench/history's archive (docs/operations.md "Retention and archive"): the simulated history moved
// to segments as `converge store archive` moves it, the bytes per archived event by type, brotli
// against gzip on the same segment text, and `state --at` read through the archive.

export type ArchiveFigures = Readonly<{
  events: number;
  segments: number;
  /** Blocks in the segments (format v2: each compressed on its own). */
  blocks: number;
  bytes: number;
  rawBytes: number;
  /** Per type: events archived and their segment lines' uncompressed bytes. */
  byType: ReadonlyMap<string, { events: number; rawBytes: number }>;
  /** Compressed size and time of the segment text (its first `codecBytes`) by codec and level. */
  codecs: readonly { codec: string; bytes: number; ms: number }[];
  /** The bytes of segment text the codecs compressed: all of it, or the first codecSampleCap. */
  codecBytes: number;
  /** state --at through the archive, ms per call. */
  asOfArchived: number[];
  archiveS: number;
}>;

/**
 * The codecs compress at most this much of the segment text: a year of lines is past what one
 * string may hold, and the ratios settle long before.
 */
const codecSampleCap = 256 * 1024 * 1024;

export async function archiveHistory(
  path: string,
  dir: string,
  o: Readonly<{ before: string; below: bigint; asOf: Readonly<{ nodes: readonly string[]; at: number }> }>,
): Promise<ArchiveFigures> {
  const t0 = performance.now();
  const r = await archiveSqliteStore(path, { dir, before: o.before, belowPosition: o.below });
  const archiveS = (performance.now() - t0) / 1000;
  const byType = new Map<string, { events: number; rawBytes: number }>();
  const texts: Buffer[] = [];
  let textBytes = 0;
  let blocks = 0;
  for (const f of readdirSync(dir)) {
    blocks += (openSegment(join(dir, f), f).header as { blocks?: unknown[] }).blocks?.length ?? 1;
    // The lines as v1 wrote them (position order): the codecs below compress the same text as before.
    for (const r of readSegmentFile(join(dir, f), f).rows) {
      const line = Buffer.from(`${rowLine(r)}\n`, 'utf8');
      if (textBytes < codecSampleCap) texts.push(line);
      textBytes += line.length;
      const t = byType.get(r.type) ?? { events: 0, rawBytes: 0 };
      t.events++;
      t.rawBytes += line.length;
      byType.set(r.type, t);
    }
  }
  const all = Buffer.concat(texts);
  const codecs: { codec: string; bytes: number; ms: number }[] = [];
  const time = (codec: string, f: () => Buffer): void => {
    const s = performance.now();
    const bytes = f().length;
    codecs.push({ codec, bytes, ms: performance.now() - s });
  };
  for (const level of [6, 9]) time(`gzip -${level}`, () => gzipSync(all, { level }));
  // Quality 9 and 11 take minutes on a history this size: only when asked.
  for (const q of process.env['BENCH_HISTORY_SLOW_CODECS'] === '1' ? [4, 5, 6, 9, 11] : [4, 5, 6])
    time(`brotli q${q}`, () =>
      brotliCompressSync(all, {
        params: { [z.BROTLI_PARAM_QUALITY]: q, [z.BROTLI_PARAM_SIZE_HINT]: all.length, [z.BROTLI_PARAM_MODE]: z.BROTLI_MODE_TEXT },
      }),
    );

  const store = await withArchive(createSqliteEventStore(path), dir);
  const asOfArchived: number[] = [];
  try {
    for (const node of o.asOf.nodes) {
      const s = performance.now();
      await stateAsOf(store, node, { kind: 'time', time: o.asOf.at, iso: new Date(o.asOf.at).toISOString() });
      asOfArchived.push(performance.now() - s);
    }
  } finally {
    await store.close();
  }
  return {
    events: r.events,
    segments: r.segments.length,
    blocks,
    bytes: r.bytes,
    rawBytes: r.rawBytes,
    byType,
    codecs,
    codecBytes: all.length,
    asOfArchived,
    archiveS,
  };
}
