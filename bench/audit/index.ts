// The audit tree (docs/audit.md): its pure parts over synthetic leaves against a bare SHA-256 of the
// same bytes (builder.ts), then a SQLite store built through the adapter's own append: `converge
// audit verify`'s walk against a bare SHA-256 pass over the stored rows, and the append with the
// tree against the same adapter without it (store.ts); and `audit export` of one node over an
// archive, from the segments' summaries against every leaf (export.ts). Passes alternate, baseline first.
//
//   npm run bench -- audit      BENCH_AUDIT_EVENTS=1000000 BENCH_AUDIT_LEAVES=1000000 BENCH_PASSES=3
//   (BENCH_AUDIT_APPEND_SMALL=50000, BENCH_AUDIT_APPEND_LARGE=200000: the events per append pass;
//   BENCH_AUDIT_EXPORT_EVENTS=200000: the archived store export reads, BENCH_AUDIT_EXPORT_SEGMENTS=100: its segments)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBenchReport } from '../support/report.ts';
import { builderRows } from './builder.ts';
import { exportRows } from './export.ts';
import { storeRows } from './store.ts';

const scale = Number(process.env['CONVERGE_BENCH_SCALE'] ?? 1);
const sized = (name: string, published: number): number => Math.max(10_000, Math.round(Number(process.env[name] ?? published) * scale));
const passes = Number(process.env['BENCH_PASSES'] ?? 3);

const report = createBenchReport(
  'Audit tree (RFC 9162 Merkle tree)',
  'The tree builder and the leaf encoding over synthetic events against one bare SHA-256 per event over the same bytes; ' +
    "`converge audit verify`'s walk over a SQLite store against a bare SHA-256 pass over its stored rows; the SQLite " +
    'append with the tree against the same adapter with the tree turned off; `audit export` of one node over an ' +
    "archive from the segments' summaries against every leaf. All in the same run.",
);
await builderRows(report, sized('BENCH_AUDIT_LEAVES', 1_000_000), passes);
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-audit-'));
try {
  await storeRows(report, dir, {
    events: sized('BENCH_AUDIT_EVENTS', 1_000_000),
    appendSmall: sized('BENCH_AUDIT_APPEND_SMALL', 50_000),
    appendLarge: sized('BENCH_AUDIT_APPEND_LARGE', 200_000),
    passes,
  });
  await exportRows(report, dir, sized('BENCH_AUDIT_EXPORT_EVENTS', 200_000), passes);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
report.end();
