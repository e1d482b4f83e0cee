import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import { readSegmentFile } from '../../src/store/archive/segment.ts';
import { withArchive } from '../../src/store/archive/withArchive.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { archivableFleet, dayMs } from '../support/archivableFleet.ts';
import { until } from '../support/until.ts';
import { prng } from './fixtures/killMidRun.ts';

// docs/operations.md "Retention and archive", the crash guarantee: a move SIGKILLed at any of its
// steps leaves every event in exactly one of the store and the archive, or in both only while the
// manifest does not name the segment; the next run removes what the dead one left and completes
// the move. The child (fixtures/archiveMover.ts) stops where CONVERGE_TEST_ARCHIVE_PAUSE says (at
// the k-th segment, k seeded) and is killed there: staged, not a guess at timing.

const mover = fileURLToPath(new URL('./fixtures/archiveMover.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'converge-archive-crash-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const seed = Number(process.env.CONVERGE_CRASH_SEED ?? 20261202);
const cutoff = new Date(Date.now() - 30 * dayMs).toISOString();
const base = join(dir, 'base.db');
let below = 0n;
let all: bigint[] = [];
let closed: bigint[] = [];

/** The file and its write-ahead log, as a backup of a closed store would copy them. */
function copyStore(from: string, to: string): void {
  copyFileSync(from, to);
  if (existsSync(`${from}-wal`)) copyFileSync(`${from}-wal`, `${to}-wal`);
}

const hotPositions = (path: string): bigint[] => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT position FROM events ORDER BY position').pluck().safeIntegers().all() as bigint[];
  } finally {
    db.close();
  }
};

const manifestFiles = (path: string): { file: string; sha256: string; events: number }[] => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT file, sha256, events FROM archive_segments').all() as { file: string; sha256: string; events: number }[];
  } finally {
    db.close();
  }
};

const archivedSendPositions = (path: string): bigint[] => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT position FROM archived_sends ORDER BY position').pluck().safeIntegers().all() as bigint[];
  } finally {
    db.close();
  }
};

const segmentPositions = (archive: string, file: string): bigint[] =>
  readSegmentFile(join(archive, file), file).rows.map((r) => r.position);

function runMover(path: string, archive: string, pause: string | null): Promise<{ signal: NodeJS.Signals | null; out: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', mover, path, archive, cutoff, below.toString()], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, CONVERGE_TEST_ARCHIVE_PAUSE: pause ?? '' },
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_c, signal) => resolve(signal)));
  return (async () => {
    if (pause !== null) {
      await until(`the mover to pause at ${pause}`, () => out.includes(`paused ${pause.split(':')[0]}`), 120_000);
      child.kill('SIGKILL');
    }
    return { signal: await exited, out };
  })();
}

/** Every event in the store or in a segment the manifest names, never both; a segment it does not name holds only events still in the store. */
function assertEachEventOnce(path: string, archive: string): { archived: bigint[] } {
  const hot = new Set(hotPositions(path));
  const named = manifestFiles(path);
  const archived: bigint[] = [];
  const sends: bigint[] = [];
  for (const m of named) {
    const rows = readSegmentFile(join(archive, m.file), m.file).rows;
    assert.equal(rows.length, m.events);
    archived.push(...rows.map((r) => r.position));
    sends.push(...rows.filter((r) => r.type === 'DeclarationSent').map((r) => r.position));
  }
  // findSend's archived sends (schema v7) moved with their segment, in its transaction.
  assert.deepEqual(
    archivedSendPositions(path),
    sends.sort((a, b) => (a < b ? -1 : 1)),
    'archived_sends names the archived sends',
  );
  for (const p of archived) assert.ok(!hot.has(p), `position ${p} is both in the store and in a segment the manifest names`);
  assert.deepEqual(
    [...hot, ...archived].sort((a, b) => (a < b ? -1 : 1)),
    all,
    'every event is in the store or the archive',
  );
  const names = new Set(named.map((m) => m.file));
  for (const f of readdirSync(archive)) {
    if (names.has(f) || f.endsWith('.tmp')) continue;
    for (const p of segmentPositions(archive, f))
      assert.ok(hot.has(p), `${f}, which the manifest does not name, holds ${p}, which left the store`);
  }
  return { archived: archived.sort((a, b) => (a < b ? -1 : 1)) };
}

before(async () => {
  ({ snapshotPosition: below } = await archivableFleet(base));
  all = hotPositions(base);
  const path = join(dir, 'reference.db');
  copyStore(base, path);
  const r = await runMover(path, join(dir, 'reference'), null);
  assert.match(r.out, /^done \d+$/m);
  closed = assertEachEventOnce(path, join(dir, 'reference')).archived;
  assert.ok(manifestFiles(path).length >= 4, 'the reference run made several segments');
});

const random = prng(seed);
for (const phase of ['temp-written', 'renamed', 'before-commit', 'committed']) {
  const nth = 1 + Math.floor(random() * 3);
  test(
    `a move SIGKILLed at ${phase} of segment ${nth} leaves each event once, and a rerun completes it (seed ${seed})`,
    { timeout: 300_000 },
    async () => {
      const path = join(dir, `${phase}.db`);
      const archive = join(dir, `${phase}-archive`);
      copyStore(base, path);
      const killed = await runMover(path, archive, `${phase}:${nth}`);
      assert.equal(killed.signal, 'SIGKILL');
      const atKill = assertEachEventOnce(path, archive);
      // Killed inside the transaction: nothing of that segment committed.
      const committedBefore = phase === 'committed' ? nth : nth - 1;
      assert.equal(manifestFiles(path).length, committedBefore);
      if (phase !== 'temp-written') assert.ok(atKill.archived.length < closed.length);

      const rerun = await runMover(path, archive, null);
      assert.match(rerun.out, /^done \d+$/m);
      const done = assertEachEventOnce(path, archive);
      assert.deepEqual(done.archived, closed, 'the rerun archived exactly what an uninterrupted move does');
      assert.deepEqual(
        readdirSync(archive).sort(),
        manifestFiles(path)
          .map((m) => m.file)
          .sort(),
        'no leftover file',
      );

      // And the log still verifies, walked through the archive.
      const store = await withArchive(createSqliteEventStore(path), archive);
      try {
        const r = await verifyLog({ head: () => store.auditHead(), read: (after, limit) => store.readStored({ after, limit }) });
        assert.equal(r.finding, null, JSON.stringify(r.finding));
        assert.equal(r.events, all.length);
      } finally {
        await store.close();
      }
    },
  );
}
