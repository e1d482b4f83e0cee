import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import Database from 'better-sqlite3';
import { makeAliveSeen, streamOf } from '../../src/core/events/index.ts';
import type { ArchiveSummary } from '../../src/store/archive/archiveMove.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { onArchiveStores } from '../support/archiveStores.ts';
import type { ArchiveStore } from '../support/archiveStores.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { unsignedBundle, withoutSummaries } from '../support/evidence.ts';
import { runSql } from '../support/postgres.ts';
import { randomFleet } from '../support/randomArchiveFleet.ts';

// The back-fill of the segments' summaries (docs/audit.md "Proofs without the whole log"): a store
// whose segments were archived with none (before summaries existed: no row in the store, no `tree`
// in the header) gets, from `audit verify`'s walk of every leaf, the summaries the move would have
// written, and export then reads the ranges it does not need from them, opening no other header.

const dir = mkdtempSync(join(tmpdir(), 'converge-archive-summary-backfill-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Every segment as an older release left it: no summary kept by the store, none in its header. */
async function withhold(s: ArchiveStore, archive: string, files: readonly string[]): Promise<void> {
  if (s.name === 'sqlite') {
    const db = new Database(s.url.slice('sqlite:'.length));
    db.exec('DELETE FROM archive_segment_summaries');
    db.close();
  } else await runSql(`DELETE FROM ${new URL(s.url).searchParams.get('schema')}.archive_segment_summaries`);
  for (const f of files) {
    const bytes = readFileSync(join(archive, f));
    const nl = bytes.indexOf(10);
    const { tree: _, ...header } = JSON.parse(bytes.subarray(0, nl).toString('utf8')) as { tree?: unknown };
    writeFileSync(join(archive, f), Buffer.concat([Buffer.from(JSON.stringify(header)), bytes.subarray(nl)]));
  }
}

onArchiveStores(
  dir,
  'audit verify over segments archived without summaries',
  'writes the ones the move would have, and export uses them',
  async (s) => {
    const archive = join(dir, `archive-${s.name}`);
    const { head, nodes } = await randomFleet(s.open(), 11);
    const cutoff = (days: number): string => new Date(Date.now() - days * 86_400_000).toISOString();
    // serve --retain's batches, then rows they kept hot archived by later runs (segments with empty ranges, foreign rows).
    let cursor = 0n;
    for (;;) {
      const r = (await s.archive({
        dir: archive,
        before: cutoff(60),
        belowPosition: head,
        segmentEvents: 41,
        maxSegments: 1,
        after: cursor,
      })) as ArchiveSummary;
      if (r.events === 0) break;
      cursor = r.scannedTo;
    }
    const more = s.open();
    await more.append(
      nodes.map((node) => ({ stream: streamOf(node), expected: 'any' as const, events: [makeAliveSeen({ node }, Date.now() - 60_000)] })),
    );
    await more.close();
    await s.archive({ dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 2, maxSegments: 2 });
    await s.archive({ dir: archive, before: cutoff(0), belowPosition: head, segmentEvents: 47 });

    const first = await withArchive(s.open(), archive);
    const written = await first.archiveSummaries!();
    const files = first.manifest.segments.map((x) => x.file);
    await first.close();
    assert.equal(written.size, files.length, 'the move kept every segment a summary');
    assert.ok(
      [...written.values()].some((x) => typeof x === 'object' && x.first === x.end),
      'a segment with an empty range',
    );
    await withhold(s, archive, files);

    const moment = new Date().toISOString();
    const ask = async (node: string) => {
      const read = new Set<string>();
      const opened = new Set<string>();
      const st = await withArchive(s.open(), archive, { onRead: (f) => read.add(f), onOpen: (f) => opened.add(f) });
      try {
        const bundle = JSON.stringify(await unsignedBundle(st, node, moment));
        const unread = [...opened].filter((f) => !read.has(f));
        const counted = new Set(read);
        const every = JSON.stringify(await unsignedBundle(withoutSummaries(st), node, moment));
        return { bundle, every, read: counted, opened: unread };
      } finally {
        await st.close();
      }
    };
    const before = await ask('solo3');
    assert.equal(before.read.size, files.length, 'with no summary anywhere, export reads every segment');

    const args = ['--store', s.url, '--archive-dir', archive];
    const verify = await cliIn(dir, ['audit', 'verify', ...args]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    assert.match(verify.stdout, new RegExp(`^summaries: ${files.length} archive segment\\(s\\) had none in the store`, 'm'));
    const filled = await withArchive(s.open(), archive);
    assert.deepEqual(new Map(await filled.archiveSummaries!()), new Map(written), 'the summaries the move wrote, each');
    await filled.close();

    for (const node of ['solo3', 'solo0', 'n38']) {
      const after = await ask(node);
      assert.equal(after.bundle, after.every, `${node}: the bundle a walk of every leaf gives`);
      assert.ok(after.read.size < files.length / 2, `${node}: ${after.read.size} of ${files.length} segments read whole`);
      assert.deepEqual(after.opened, [], `${node}: no header opened of a segment not read whole`);
    }
    const again = await cliIn(dir, ['audit', 'verify', ...args, '--json']);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.equal(JSON.parse(again.stdout).summariesWritten, undefined, 'nothing left to write, and what was written checks');
  },
);
