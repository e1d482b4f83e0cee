// `converge audit export` over an archived store (docs/audit.md "Proofs without the whole log"):
// the bundle of one node built from the segments' summaries of their leaf ranges and the node's own
// segments, against the same store read leaf by leaf through every segment (what export does when a
// segment has no summary). The two bundles must be the same bytes; the run fails otherwise.
import { join } from 'node:path';
import { aliveSeenId } from '../../src/core/events/index.ts';
import type { AliveSeen, NodeEvent } from '../../src/core/events/index.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { NewEvent, StreamWrite } from '../../src/store/index.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { BenchReport } from '../support/report.ts';
import { unsignedBundle, withoutStoredSummaries, withoutSummaries } from '../../test/support/evidence.ts';

const nodes = 1_000;
/** Segments the store is archived into (BENCH_AUDIT_EXPORT_SEGMENTS): the headers an export from them would open. */
const segmentCount = Number(process.env['BENCH_AUDIT_EXPORT_SEGMENTS'] ?? 100);
/** The node exported: heard only in the first 1 % of the log, so a few segments hold it, as a node retired long ago. */
const solo = 'solo';

function alive(node: string, k: number): StreamWrite {
  const seenAt = new Date(Date.UTC(2024, 0, 1) + k * 1000).toISOString();
  const event = { id: aliveSeenId(node, seenAt), type: 'AliveSeen', data: { node, seenAt } } satisfies NewEvent<NodeEvent> & AliveSeen;
  return { stream: `node-${node}`, expected: 'any', events: [event] };
}

/** `events` AliveSeen round-robin over the fleet, `solo`'s among the first 1 %, appended a thousand a call, then archived into segments. */
async function archivedStore(path: string, archive: string, events: number): Promise<number> {
  const store = createSqliteEventStore(path);
  try {
    for (let at = 0; at < events; at += 1000) {
      const writes = Array.from({ length: Math.min(1000, events - at) }, (_, i) => {
        const k = at + i;
        return alive(k < events / 100 && k % 10 === 0 ? solo : `n${k % nodes}`, k);
      });
      await store.append(writes);
    }
    const head = (await store.headPosition())!;
    await store.close();
    const moved = await archiveSqliteStore(path, {
      dir: archive,
      before: new Date().toISOString(),
      belowPosition: head + 1n,
      segmentEvents: Math.ceil(events / segmentCount),
    });
    return moved.segments.length;
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** Where export takes the summaries from: the store's copy, the segments' headers, or nowhere (every leaf read). */
type Mode = 'store' | 'headers' | 'every';

/** The bundle's JSON, the seconds it took, the segments read whole, and the headers opened. */
async function exportOnce(
  path: string,
  archive: string,
  moment: string,
  mode: Mode,
): Promise<{ json: string; s: number; read: number; opened: number }> {
  const read = new Set<string>();
  const headers = new Set<string>();
  const opened = await withArchive(createSqliteEventStore(path), archive, {
    onRead: (file) => read.add(file),
    onOpen: (file) => headers.add(file),
  });
  // Without summaries the walk reads every leaf, as for segments archived before they were written;
  // without the store's copy it opens every header, as for segments the release before archived.
  const store = mode === 'store' ? opened : mode === 'headers' ? withoutStoredSummaries(opened) : withoutSummaries(opened);
  try {
    const t = performance.now();
    const bundle = await unsignedBundle(store, solo, moment);
    const s = (performance.now() - t) / 1000;
    return { json: JSON.stringify(bundle), s, read: read.size, opened: headers.size };
  } finally {
    await opened.close();
  }
}

export async function exportRows(report: BenchReport, dir: string, events: number, passes: number): Promise<void> {
  const path = join(dir, 'export.db');
  const archive = join(dir, 'export-archive');
  const segments = await archivedStore(path, archive, events);
  const fast: number[] = [];
  const every: number[] = [];
  const fromHeaders: number[] = [];
  let reads = { fast: 0, every: 0 };
  let opened = { fast: 0, headers: 0 };
  for (let p = 0; p < passes; p++) {
    const moment = new Date().toISOString();
    const b = await exportOnce(path, archive, moment, 'every');
    const a = await exportOnce(path, archive, moment, 'store');
    const h = await exportOnce(path, archive, moment, 'headers');
    if (a.json !== b.json || h.json !== b.json) throw new Error('the bundle from the summaries differs from the bundle of every leaf');
    every.push(b.s);
    fast.push(a.s);
    fromHeaders.push(h.s);
    reads = { fast: a.read, every: b.read };
    opened = { fast: a.opened, headers: h.opened };
  }
  const n = events.toLocaleString('en-US');
  report.row({
    name: `audit export of one node over ${segments} archive segments (${n} events), from the summaries`,
    unit: 's',
    better: 'lower',
    converge: fast,
    baseline: every,
    notes:
      `segments read whole: ${reads.fast} against ${reads.every}; the bundles are the same bytes (checked each pass); ` +
      'baseline: the same store and reader with the summaries ignored, every leaf read as for segments archived without them',
  });
  report.row({
    name: `audit export of one node over ${segments} archive segments (${n} events), summaries from the store, not the headers`,
    unit: 's',
    better: 'lower',
    converge: fast,
    baseline: fromHeaders,
    notes:
      `headers opened: ${opened.fast} against ${opened.headers}; baseline: the summaries read from every segment's header, ` +
      'as for segments the release before archived (the store keeps no copy)',
  });
}
