import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { signCheckpoint } from '../../src/core/audit/checkpoint.ts';
import { eventLeafHash } from '../../src/core/audit/leaf.ts';
import { createProofTree } from '../../src/core/audit/proofTree.ts';
import { auditStream, makeAuditCheckpointed } from '../../src/core/events/index.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import type { EventStore } from '../../src/store/port.ts';
import { archiveSqliteStore } from '../../src/store/sqlite/sqliteArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { evidenceBundle, unsignedBundle, withoutSummaries } from '../support/evidence.ts';
import { randomFleet, untimed } from '../support/steppedFleet.ts';

// An evidence bundle as of a moment reads the node's stream as of it (docs/store.md "Segment time
// ranges"): over an archive, with the segments' time ranges or without them, it is the bundle the
// store gave before any move.

const dir = mkdtempSync(join(tmpdir(), 'converge-evidence-archive-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const bundle = async (store: EventStore, node: string, moment: string): Promise<unknown> => {
  try {
    return await unsignedBundle(store, node, moment);
  } finally {
    await store.close();
  }
};

test('an evidence bundle over the archive is the one the store gave before the move, time ranges or none', async () => {
  const path = join(dir, 'fleet.db');
  const archive = join(dir, 'archive');
  const f = await randomFleet(createSqliteEventStore(path), 8, true);
  const moments = [0.2, 0.6].map((frac) => new Date(f.start + frac * (f.end - f.start)).toISOString());
  const asked = moments.flatMap((m) => ['n0', 'n3'].map((node) => ({ node, m })));
  const original = [];
  for (const { node, m } of asked) original.push(await bundle(createSqliteEventStore(path), node, m));
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 40 });
  assert.ok(r.segments.length >= 10, `${r.segments.length} segments`);
  for (const [i, { node, m }] of asked.entries()) {
    assert.deepEqual(await bundle(await withArchive(createSqliteEventStore(path), archive), node, m), original[i], `${node} at ${m}`);
    const whole = await withArchive(untimed(createSqliteEventStore(path)), archive);
    assert.deepEqual(await bundle(whole, node, m), original[i], `${node} at ${m}, every segment`);
  }
});

test("over summarised segments an export reads the node's segments only, and gives the bytes a walk of every leaf gives", async () => {
  // docs/audit.md "Proofs without the whole log": the other segments stand for their leaf ranges by the roots the store keeps of them.
  const path = join(dir, 'summaries.db');
  const archive = join(dir, 'summaries');
  const f = await randomFleet(createSqliteEventStore(path), 11, false);
  const moment = new Date(f.end + 86_400_000).toISOString();
  const nodes = ['n0', 'n12', 'n14', 'n16', 'n18'];
  const original: string[] = [];
  for (const node of nodes) original.push(JSON.stringify(await bundle(createSqliteEventStore(path), node, moment)));
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 10 });
  assert.ok(r.segments.length >= 60, `${r.segments.length} segments`);
  for (const [i, node] of nodes.entries()) {
    const read = new Set<string>();
    const store = await withArchive(createSqliteEventStore(path), archive, { onRead: (file) => read.add(file) });
    const holding = r.segments.filter((s) => store.archive.streamRowsIn(s, `node-${node}`).length > 0);
    assert.equal(JSON.stringify(await bundle(store, node, moment)), original[i], `${node}: the same bundle`);
    // Its own segments, and the ranges that hold its rows kept hot (three at most: last event, send, report).
    for (const s of holding) assert.ok(read.has(s), `${node}: ${s} holds its rows and was read`);
    assert.ok(read.size <= holding.length + 3, `${node}: ${read.size} segments read whole, ${holding.length} hold its rows`);
    if (node !== 'n0') assert.ok(read.size < r.segments.length / 2, `${node}: ${read.size} of ${r.segments.length} segments read whole`);
    // Without summaries (segments the release before wrote), every segment is read, and the bundle is the same.
    const every = new Set<string>();
    const old = await withArchive(createSqliteEventStore(path), archive, { onRead: (file) => every.add(file) });
    assert.equal(
      JSON.stringify(await bundle(withoutSummaries(old), node, moment)),
      original[i],
      `${node}: the same bundle, every leaf read`,
    );
    assert.equal(every.size, r.segments.length);
  }
  // A root changed in a segment the export does not read, in the copy the store keeps (what export reads), then in
  // its header once the store keeps none: the proofs no longer give the head's root, and it refuses.
  const store = await withArchive(createSqliteEventStore(path), archive);
  const victim = r.segments.find((s) => store.archive.streamRowsIn(s, 'node-n18').length === 0)!;
  await store.close();
  const db = new Database(path);
  const kept = db.prepare('SELECT roots FROM archive_segment_summaries WHERE file = ?').pluck().get(victim) as Buffer;
  const forged = Buffer.from(kept);
  forged[0]! ^= 1;
  db.prepare('UPDATE archive_segment_summaries SET roots = ? WHERE file = ?').run(forged, victim);
  await assert.rejects(bundle(await withArchive(createSqliteEventStore(path), archive), 'n18', moment), {
    code: 'CONVERGE_ERR_EVIDENCE_LOG_CHANGED',
  });
  db.prepare('DELETE FROM archive_segment_summaries WHERE file = ?').run(victim);
  db.close();
  assert.equal(JSON.stringify(await bundle(await withArchive(createSqliteEventStore(path), archive), 'n18', moment)), original[4]);
  const file = join(archive, victim);
  const bytes = readFileSync(file);
  const nl = bytes.indexOf(10);
  const header = JSON.parse(bytes.subarray(0, nl).toString('utf8'));
  header.tree.roots[0] = (header.tree.roots[0][0] === '0' ? '1' : '0') + header.tree.roots[0].slice(1);
  writeFileSync(file, Buffer.concat([Buffer.from(JSON.stringify(header)), bytes.subarray(nl)]));
  await assert.rejects(bundle(await withArchive(createSqliteEventStore(path), archive), 'n18', moment), {
    code: 'CONVERGE_ERR_EVIDENCE_LOG_CHANGED',
  });
});

test("a checkpoint inside the archived part: the node's rows kept hot within it are proven, from the summaries as from every leaf", async () => {
  const path = join(dir, 'inside.db');
  const archive = join(dir, 'inside');
  const f = await randomFleet(createSqliteEventStore(path), 13, false);
  // A checkpoint of the first 90 % of the log, appended after it (the audit stream is never archived).
  const before = createSqliteEventStore(path);
  const rows = await before.readStored({ limit: 10_000 });
  const size = Math.floor(rows.length * 0.9);
  const root = createProofTree(rows.map((r) => eventLeafHash(r)))
    .root(size)
    .toString('hex');
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  await before.append([
    {
      stream: auditStream,
      expected: 'any',
      events: [makeAuditCheckpointed(signCheckpoint({ size, root, at: new Date().toISOString() }, privateKey))],
    },
  ]);
  await before.close();
  // A node whose stream ends inside the checkpoint: its last event stays hot, inside the archived part, below the checkpoint's size.
  const lastOf = new Map(rows.map((r, i) => [r.stream, i]));
  const node = [...lastOf]
    .filter(([, i]) => i < size - 1)
    .sort((a, b) => a[1] - b[1])[0]![0]
    .slice('node-'.length);
  const at = rows[size - 1]!.position.toString();
  // As of a position, and as of the checkpoint (whose last leaf, inside the archive, export finds the position of).
  const ask = async (store: EventStore, moment = at) => {
    try {
      return JSON.stringify(await evidenceBundle(store, node, moment, { auditKey: publicKey }));
    } finally {
      await store.close();
    }
  };
  const original = await ask(createSqliteEventStore(path));
  assert.match(original, /"signed":true/);
  const newest = await ask(createSqliteEventStore(path), 'checkpoint');
  assert.match(newest, new RegExp(`"at":"${at}"`));
  await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 10 });
  assert.equal(await ask(await withArchive(createSqliteEventStore(path), archive)), original, `${node} as of ${at}, from the summaries`);
  assert.equal(await ask(await withArchive(createSqliteEventStore(path), archive), 'checkpoint'), newest, `${node} as of the checkpoint`);
  const every = await withArchive(createSqliteEventStore(path), archive);
  (every.archive as { summaries: () => unknown[] }).summaries = () => [];
  assert.equal(await ask(every), original, `${node} as of ${at}, every leaf`);
});

test('an evidence bundle from the hot store alone, its history archived, is refused as needing the archive, not as a changed log', async () => {
  const path = join(dir, 'bare.db');
  const archive = join(dir, 'bare');
  const f = await randomFleet(createSqliteEventStore(path), 5, true);
  const moment = new Date(f.start + 0.5 * (f.end - f.start)).toISOString();
  const r = await archiveSqliteStore(path, { dir: archive, before: new Date().toISOString(), belowPosition: f.head, segmentEvents: 40 });
  // The store itself, as a caller that never looked for an archive hands it over.
  await assert.rejects(bundle(createSqliteEventStore(path), 'n0', moment), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'CONVERGE_ERR_ARCHIVE_NEEDED', err.message);
    assert.match(err.message, new RegExp(`the store moved \\d+ events to ${r.segments.length} archive segment\\(s\\); give --archive-dir`));
    return true;
  });
});
