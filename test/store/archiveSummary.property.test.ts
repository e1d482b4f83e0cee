import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { eventLeafHash } from '../../src/core/audit/leaf.ts';
import { createProofTree } from '../../src/core/audit/proofTree.ts';
import { rangeRoots } from '../../src/core/audit/rangeProofTree.ts';
import { createSummaryCheck, parseRangeSummary } from '../../src/core/audit/rangeSummary.ts';
import { createSummaryBackfill } from '../../src/core/audit/summaryBackfill.ts';
import type { RangeSummaryJson, SummaryToCheck } from '../../src/core/audit/rangeSummary.ts';
import { archivedOf, moveClosedHistory } from '../../src/store/archive/archiveMove.ts';
import type { ArchiveSource } from '../../src/store/archive/archiveMove.ts';
import { createArchiveReader } from '../../src/store/archive/archiveReader.ts';
import { walkBySummaries } from '../../src/store/archive/proofWalk.ts';
import { readSegmentFile } from '../../src/store/archive/segment.ts';
import { storedOf } from '../../src/store/archive/withArchive.ts';
import type { ArchivedStore } from '../../src/store/archive/withArchive.ts';
import type { ArchivedRow } from '../../src/store/archive/segment.ts';
import type { ArchiveManifest } from '../../src/store/port.ts';

// docs/audit.md "Proofs without the whole log": each segment the move writes carries the summary
// of its leaf range, and over any sequence of moves (store archive's whole runs, serve --retain's
// batches of one segment from where the last stopped, appends in between, rows kept hot and
// archived later, positions with gaps as a store from before schema v4 has) the ranges tile the
// archived part of the tree with no gap and no overlap, and each range's roots and foreign rows are
// those of the whole log's leaves. audit verify's check (createSummaryCheck) finds nothing wrong
// with them, and finds a root changed; export's walk from them (proofWalk.ts) gives the proofs,
// rows and leaf indices a walk of every leaf gives.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-summary-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const streams = ['node-a', 'node-b', 'node-c', 'node-d', 'rollout-x'];
const types = ['DeclarationSent', 'ReportReceived', 'NodeAlive'];
const day = 86_400_000;

type World = {
  hot: Map<bigint, ArchivedRow>;
  all: ArchivedRow[];
  manifest: { file: string; from: bigint; to: bigint; events: number; sha256: string; rows: ArchivedRow[] }[];
  next: bigint;
  revisions: Map<string, bigint>;
};

/** Append `n` rows; `gaps` skips positions now and then (as AUTOINCREMENT did before schema v4). */
function append(w: World, n: number, seed: number, gaps: boolean): void {
  for (let i = 0; i < n; i++) {
    const k = (seed + i * 7919) >>> 0;
    if (gaps && k % 5 === 0) w.next += BigInt(1 + (k % 3));
    const position = w.next++;
    const stream = streams[k % streams.length]!;
    const revision = w.revisions.get(stream) ?? 0n;
    w.revisions.set(stream, revision + 1n);
    const fields = {
      position,
      id: `e${position}`,
      stream,
      revision,
      type: types[(k >>> 3) % types.length]!,
      data: `{"n":${position}}`,
      metadata: '{}',
      // Times rise with the position, a little out of order now and then.
      time: new Date(Number(position) * day - (k % 4) * 3_600_000).toISOString(),
      leaf: null,
    };
    // The leaf of the row's own bytes, as the store writes it: export hashes the rows it reads again.
    const row: ArchivedRow = { ...fields, leaf: eventLeafHash(storedOf(fields)).toString('hex') };
    w.hot.set(position, row);
    w.all.push(row);
  }
}

function sourceOf(w: World, legacy: boolean): ArchiveSource {
  const manifest: ArchiveManifest = {
    store: 'store-1',
    segments: w.manifest.map((s) => ({ file: s.file, from: s.from, to: s.to, events: s.events, sha256: '', bytes: 0, rawBytes: 0 })),
  };
  const sorted = () => [...w.hot.values()].sort((a, b) => (a.position < b.position ? -1 : 1));
  return {
    store: 'store-1',
    archived: archivedOf(manifest),
    countBelow: async (p) => sorted().filter((r) => r.position < p).length,
    // A legacy run: the leaves cannot be read (no summary), and its segments' headers lose theirs (play).
    leaves: async (from, to) =>
      sorted().flatMap((r) => (r.position >= from && r.position <= to ? [[r.position, legacy ? null : r.leaf] as const] : [])),
    page: async (after, below, limit) =>
      sorted()
        .filter((r) => r.position > after && r.position < below)
        .slice(0, limit),
    pinned: async (ss) => {
      const out = new Map<string, Set<bigint>>();
      for (const s of ss) {
        const rows = sorted().filter((r) => r.stream === s);
        const lastOf = (t?: string) => rows.filter((r) => t === undefined || r.type === t).at(-1)?.position;
        out.set(s, new Set([lastOf(), lastOf('DeclarationSent'), lastOf('ReportReceived')].filter((p): p is bigint => p !== undefined)));
      }
      return out;
    },
    commit: async (seg) => {
      for (const r of seg.rows) assert.ok(w.hot.delete(r.position));
      const rows = [...seg.rows];
      w.manifest.push({
        file: seg.file,
        from: rows[0]!.position,
        to: rows.at(-1)!.position,
        events: rows.length,
        sha256: seg.sha256,
        rows,
      });
    },
  };
}

type Step = Readonly<{ appends: number; olderThanDays: number; below: number; batch: boolean; segmentEvents: number; legacy: boolean }>;

const step: fc.Arbitrary<Step> = fc.record({
  appends: fc.integer({ min: 0, max: 40 }),
  olderThanDays: fc.integer({ min: 0, max: 30 }),
  below: fc.integer({ min: 0, max: 10 }),
  batch: fc.boolean(),
  segmentEvents: fc.integer({ min: 1, max: 25 }),
  legacy: fc.boolean(),
});

let run = 0;

async function play(steps: readonly Step[], gaps: boolean, withLegacy: boolean) {
  const w: World = { hot: new Map(), all: [], manifest: [], next: 1n, revisions: new Map() };
  const folder = join(dir, `run-${run++}`);
  mkdirSync(folder);
  const legacyFiles = new Set<string>();
  let cursor = 0n;
  for (const [i, s] of steps.entries()) {
    append(w, s.appends, i * 104_729 + s.appends, gaps);
    const legacy = withLegacy && s.legacy;
    const now = Number(w.next) * day;
    const r = await moveClosedHistory(sourceOf(w, legacy), {
      dir: folder,
      before: new Date(now - s.olderThanDays * day).toISOString(),
      belowPosition: w.next - BigInt(s.below),
      segmentEvents: s.segmentEvents,
      pause: () => {},
      // serve --retain: one segment at a time, from where the last batch stopped (src/app/retention.ts).
      ...(s.batch ? { maxSegments: 1, after: cursor } : {}),
    });
    if (s.batch) cursor = r.events > 0 ? r.scannedTo : 0n;
    if (legacy) for (const f of r.segments) legacyFiles.add(f);
  }
  // A legacy run's segments carry no summary, as the release before wrote them.
  for (const f of legacyFiles) {
    const path = join(folder, f);
    const bytes = readFileSync(path);
    const nl = bytes.indexOf(10);
    const { tree: _, ...header } = JSON.parse(bytes.subarray(0, nl).toString('utf8')) as { tree?: unknown };
    writeFileSync(path, Buffer.concat([Buffer.from(JSON.stringify(header)), bytes.subarray(nl)]));
  }
  return { w, folder, legacyFiles };
}

test("property: the summaries of any sequence of moves tile the archived tree and hold the whole log's roots", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 8 }), fc.boolean(), fc.boolean(), async (steps, gaps, withLegacy) => {
      const { w, folder, legacyFiles } = await play(steps, gaps, withLegacy);
      const order = [...w.all].sort((a, b) => (a.position < b.position ? -1 : 1));
      const leafIndex = new Map(order.map((r, i) => [r.position, i]));
      const leaves = order.map((r) => Buffer.from(r.leaf!, 'hex'));
      const summarised: { name: string; from: bigint; to: bigint; summary: RangeSummaryJson }[] = [];
      for (const s of w.manifest) {
        const d = readSegmentFile(join(folder, s.file), s.file);
        assert.deepEqual(
          d.rows.map((r) => r.position),
          s.rows.map((r) => r.position),
        );
        const tree = (d.header as { tree?: unknown }).tree;
        if (legacyFiles.has(s.file)) continue;
        const summary = parseRangeSummary(tree);
        assert.ok(typeof summary !== 'string', `${s.file}: ${String(summary)}`);
        // The range ends one past the segment's last row, unless every row of it lies in earlier ranges.
        if (summary.end > summary.first) assert.equal(summary.end, leafIndex.get(s.to)! + 1, `${s.file}'s range ends past its last row`);
        else assert.ok(leafIndex.get(s.to)! < summary.first);
        assert.deepEqual(
          summary.roots,
          rangeRoots(summary.first, leaves.slice(summary.first, summary.end)).map((h) => h.toString('hex')),
        );
        const own = new Set(s.rows.map((r) => r.position));
        assert.deepEqual(
          summary.foreign,
          order.slice(summary.first, summary.end).flatMap((r) => (own.has(r.position) ? [] : [[r.position.toString(), r.leaf]])),
        );
        summarised.push({ name: s.file, from: s.from, to: s.to, summary });
      }
      // Written in order, the ranges follow one another: no overlap, and no gap but a legacy run's.
      for (let i = 1; i < summarised.length; i++) {
        const [a, b] = [summarised[i - 1]!.summary, summarised[i]!.summary];
        assert.ok(b.first >= a.end, `ranges ${a.first}-${a.end} and ${b.first}-${b.end} overlap`);
        if (legacyFiles.size === 0) assert.equal(b.first, a.end, `a gap between ranges ${a.first}-${a.end} and ${b.first}-${b.end}`);
      }
      if (legacyFiles.size === 0 && summarised.length > 0) assert.equal(summarised[0]!.summary.first, 0);
      // Every row up to the last range's end is archived or hot: the ranges cover what was archived.
      const archivedLast = w.manifest.reduce((m, s) => (s.to > m ? s.to : m), 0n);
      if (legacyFiles.size === 0 && w.manifest.length > 0) assert.equal(summarised.at(-1)!.summary.end, leafIndex.get(archivedLast)! + 1);

      // audit verify's check agrees with every summary, and finds one root changed.
      const positions = (name: string) => w.manifest.find((s) => s.file === name)!.rows.map((r) => r.position);
      const walk = (toCheck: readonly SummaryToCheck[]) => {
        const check = createSummaryCheck(toCheck, positions);
        for (const [i, r] of order.entries()) {
          const f = check.leaf(i, r.position, leaves[i]!, 0);
          if (f !== null) return f;
        }
        return check.end(order.length);
      };
      assert.equal(walk(summarised), null);
      const victim = summarised.findIndex((s) => s.summary.roots.length > 0);
      if (victim >= 0) {
        const bad = summarised.map((s, i) =>
          i === victim
            ? {
                ...s,
                summary: { ...s.summary, roots: s.summary.roots.map((h, k) => (k === 0 ? h.replace(/^./, h[0] === '0' ? '1' : '0') : h)) },
              }
            : s,
        );
        const f = walk(bad);
        assert.equal(f?.name, summarised[victim]!.name);
        assert.match(f!.message, /root 1 of/);
      }
    }),
    { numRuns: 60 },
  );
});

test('property: the back-fill from one walk of the whole log gives each segment archived without a summary the one the move writes', async () => {
  // docs/audit.md "Proofs without the whole log": the same moves played twice, once with some runs writing no summary
  // (the release before, or before summaries existed), once with all; the back-fill of the first gives the second's.
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 8 }), fc.boolean(), async (steps, gaps) => {
      const moved = await play(steps, gaps, false);
      const { w, legacyFiles } = await play(steps, gaps, true);
      const written = new Map(
        moved.w.manifest.map((s) => [s.file, (readSegmentFile(join(moved.folder, s.file), s.file).header as { tree?: unknown }).tree]),
      );
      const order = [...w.all].sort((a, b) => (a.position < b.position ? -1 : 1));
      const positions = (name: string) => w.manifest.find((s) => s.file === name)!.rows.map((r) => r.position);
      // Every segment pending, so each range is recomputed, the legacy ones among them: the manifest lists them as archived.
      const fill = createSummaryBackfill(
        w.manifest.map((s) => ({ name: s.file, to: s.to })),
        new Set(w.manifest.map((s) => s.file)),
        positions,
      );
      for (const [i, r] of order.entries()) assert.equal(fill.leaf(i, r.position, Buffer.from(r.leaf!, 'hex'), 0), null);
      assert.equal(fill.end(order.length), null);
      assert.deepEqual(new Map(fill.made()), written);
      for (const f of legacyFiles) assert.ok(fill.made().has(f), `${f}: archived without a summary, given one`);
    }),
    { numRuns: 60 },
  );
});

test("a summary's foreign rows: one dropped, one added, one with another leaf, each found", async () => {
  // One move of n1's closed history while node-b's rows stay hot: the segment's range holds them as foreign.
  const w: World = { hot: new Map(), all: [], manifest: [], next: 1n, revisions: new Map() };
  append(w, 30, 1, false);
  mkdirSync(join(dir, 'foreign'));
  await moveClosedHistory(sourceOf(w, false), {
    dir: join(dir, 'foreign'),
    before: new Date(40 * day).toISOString(),
    belowPosition: 31n,
    pause: () => {},
  });
  const s = w.manifest[0]!;
  const summary = parseRangeSummary((readSegmentFile(join(dir, 'foreign', s.file), s.file).header as { tree?: unknown }).tree);
  assert.ok(typeof summary !== 'string');
  assert.ok(summary.foreign.length > 0, 'the rows each stream keeps hot are foreign');
  const order = [...w.all].sort((a, b) => (a.position < b.position ? -1 : 1));
  const walk = (sum: unknown) => {
    const check = createSummaryCheck([{ name: s.file, from: s.from, to: s.to, summary: parseRangeSummary(sum) }], () =>
      s.rows.map((r) => r.position),
    );
    for (const [i, r] of order.entries()) {
      const f = check.leaf(i, r.position, Buffer.from(r.leaf!, 'hex'), 0);
      if (f !== null) return f.message;
    }
    return check.end(order.length)?.message ?? null;
  };
  assert.equal(walk(summary), null);
  assert.match(walk({ ...summary, foreign: summary.foreign.slice(1) })!, /neither in the segment nor among its foreign rows/);
  const ownRow = s.rows.find((r) => r.position > BigInt(summary.foreign[0]![0]))!;
  assert.match(
    walk({ ...summary, foreign: [...summary.foreign, [ownRow.position.toString(), ownRow.leaf!]] })!,
    /segment's own, yet listed as foreign/,
  );
  assert.match(
    walk({ ...summary, foreign: [[summary.foreign[0]![0], '0'.repeat(64)], ...summary.foreign.slice(1)] })!,
    /does not carry that row's leaf/,
  );
  assert.notEqual(walk({ ...summary, end: summary.end + 1 }), null);
  assert.match(walk({ ...summary, roots: ['nope'] })!, /form is wrong: its roots are not hashes/);
  assert.notEqual(walk({ ...summary, first: summary.first + 1, end: summary.end + 1 }), null);
});

test("property: export's walk from the summaries gives the proofs, rows and leaf indices of a walk of every leaf", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(step, { minLength: 1, maxLength: 6 }),
      fc.boolean(),
      fc.integer({ min: 0, max: streams.length - 1 }),
      fc.double({ min: 0.05, max: 1, noNaN: true }),
      async (steps, gaps, which, cut) => {
        const { w, folder } = await play(steps, gaps, false);
        if (w.manifest.length === 0) return;
        const order = [...w.all].sort((a, b) => (a.position < b.position ? -1 : 1));
        const whole = createProofTree(order.map((r) => Buffer.from(r.leaf!, 'hex')));
        const manifest: ArchiveManifest = {
          store: 'store-1',
          segments: w.manifest.map((s) => ({
            file: s.file,
            from: s.from,
            to: s.to,
            events: s.events,
            sha256: s.sha256,
            bytes: 0,
            rawBytes: 0,
          })),
        };
        const hot = [...w.hot.values()].sort((a, b) => (a.position < b.position ? -1 : 1)).map(storedOf);
        const store = {
          archive: createArchiveReader(folder, manifest),
          manifest,
          hot: {
            readStored: async ({ after, limit }: { after: bigint | null; limit: number }) =>
              hot.filter((r) => r.position > (after ?? 0n)).slice(0, limit),
          },
        } as unknown as ArchivedStore;
        const stream = streams[which]!;
        // A size anywhere in the log: a checkpoint may end inside the archived part, or past it.
        const size = Math.max(1, Math.ceil(order.length * cut));
        // The walk reads the range of each leaf it is asked for: a tree cut inside a range needs its leaves. So
        // the last leaf of every size a proof is made at is asked for, as export asks for its checkpoint's.
        const m = Math.floor(size / 3);
        const asked = [size - 1, Math.floor((size - 1) / 2), ...(m > 0 ? [m - 1] : [])];
        const walked = await walkBySummaries(store, size, stream, (r) => r.stream === stream, asked);
        assert.ok(walked !== null, 'every segment has a summary');
        assert.equal(walked.tree.root(size).toString('hex'), whole.root(size).toString('hex'));
        const expected = order.flatMap((r, i) => (i < size && r.stream === stream ? [[i, r.position.toString()]] : []));
        assert.deepEqual(
          walked.kept.map((r) => [r.leafIndex, r.position.toString()]),
          expected,
        );
        for (const [i] of expected) assert.deepEqual(walked.tree.inclusion(i as number, size), whole.inclusion(i as number, size));
        assert.deepEqual(
          walked.positions,
          asked.map((i) => order[i]!.position),
        );
        assert.deepEqual(walked.tree.consistency(m, size), whole.consistency(m, size));
      },
    ),
    { numRuns: 40 },
  );
});
