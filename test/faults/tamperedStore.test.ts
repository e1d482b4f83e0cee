import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { storedLeafHash } from '../../src/store/audit/auditTree.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { TamperKind } from '../../src/core/audit/verifyLog.ts';
import { verifyStore, writeHistory } from '../support/auditHistory.ts';
import { faultSeed } from './scenarios.ts';

// The insider with the SQLite file in hand (docs/audit.md#threat-model): one SQL statement
// changes the stored past, and `converge audit verify` must name the first position it touched
// and how. Each case starts from a copy of one store written through the store's own appends
// (declarations sent, the nodes' reports of them, alives: what the engine writes).

const dir = mkdtempSync(join(tmpdir(), 'converge-tamper-'));
const pristine = join(dir, 'pristine.db');
const nodes = 8;
{
  const store = createSqliteEventStore(pristine);
  await writeHistory(store, nodes);
  await writeHistory(store, nodes, 1);
  await store.close();
}
const total = BigInt(nodes * 3 * 2);
let copies = 0;

/** A copy of the pristine store, `sql` run on it as a bare SQLite connection, then verified. */
async function tampered(
  change: (db: Database.Database) => void,
): Promise<{ kind: TamperKind | null; position: bigint | null; message: string }> {
  const path = join(dir, `copy${++copies}.db`);
  copyFileSync(pristine, path);
  const db = new Database(path);
  change(db);
  db.close();
  const store = createSqliteEventStore(path);
  try {
    const { finding } = await verifyStore(store, 5);
    return { kind: finding?.kind ?? null, position: finding?.position ?? null, message: finding?.message ?? '' };
  } finally {
    await store.close();
  }
}

/** The position of the n-th stored report (1-based). */
const nthReport = (db: Database.Database, n: number): bigint =>
  db
    .prepare("SELECT position FROM events WHERE type = 'ReportReceived' ORDER BY position LIMIT 1 OFFSET ?")
    .pluck()
    .safeIntegers()
    .get(n - 1) as bigint;

test('the untouched store verifies intact', async () => {
  assert.deepEqual(await tampered(() => {}), { kind: null, position: null, message: '' });
});

test("one UPDATE of a stored report's declared digest is found, at that report", async () => {
  let at = 0n;
  const found = await tampered((db) => {
    at = nthReport(db, 5);
    db.prepare("UPDATE events SET data = json_set(data, '$.declared', ?) WHERE position = ?").run('f'.repeat(64), at);
  });
  assert.deepEqual([found.kind, found.position], ['changed', at]);
  assert.match(found.message, /ReportReceived/);
});

test('a deleted event is found as a gap at its position', async () => {
  const found = await tampered((db) => db.prepare('DELETE FROM events WHERE position = 7').run());
  assert.deepEqual([found.kind, found.position], ['gap', 7n]);
});

test('a forged report inserted with a correct leaf hash is found past the stored head', async () => {
  const found = await tampered((db) => {
    const r = db
      .prepare("SELECT stream, revision, data, metadata FROM events WHERE type = 'ReportReceived' ORDER BY position DESC LIMIT 1")
      .get() as {
      stream: string;
      revision: number;
      data: string;
      metadata: string;
    };
    // The insider knows the leaf format: the row carries the leaf the store would have written.
    const data = JSON.stringify({ ...JSON.parse(r.data), declared: 'e'.repeat(64) });
    const position = total + 1n;
    const leaf = storedLeafHash(position, r.stream, BigInt(r.revision + 10), 'ReportReceived', data, r.metadata);
    db.prepare('INSERT INTO events (position, id, stream, revision, type, data, metadata, leaf) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
      position,
      'forged-report',
      r.stream,
      r.revision + 10,
      'ReportReceived',
      data,
      r.metadata,
      leaf,
    );
  });
  assert.deepEqual([found.kind, found.position], ['inserted', total + 1n]);
});

test('two events swapped are found at the first, with the position it was written at', async () => {
  const found = await tampered((db) => {
    db.exec('UPDATE events SET position = -position WHERE position IN (10, 11)');
    db.exec('UPDATE events SET position = 11 WHERE position = -10');
    db.exec('UPDATE events SET position = 10 WHERE position = -11');
  });
  assert.deepEqual([found.kind, found.position], ['moved', 10n]);
  assert.match(found.message, /written at 11/);
});

test('a truncated tail is found against the stored head', async () => {
  const found = await tampered((db) => db.prepare('DELETE FROM events WHERE position > ?').run(total - 3n));
  assert.deepEqual([found.kind, found.position], ['truncated', total - 2n]);
});

test('a head rewritten to match nothing is found as the head', async () => {
  const found = await tampered((db) => db.exec('UPDATE audit_head SET root = zeroblob(32)'));
  assert.equal(found.kind, 'head');
});

test('property: any one byte changed in any stored event, or any event deleted, is found at that position', async () => {
  const seed = faultSeed('tampered store property');
  await fc.assert(
    fc.asyncProperty(
      fc.bigInt({ min: 1n, max: total }),
      fc.oneof(
        fc.record({ kind: fc.constant('byte' as const), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }),
        fc.constant({ kind: 'delete' as const }),
      ),
      async (position, change) => {
        const found = await tampered((db) => {
          if (change.kind === 'delete') return void db.prepare('DELETE FROM events WHERE position = ?').run(position);
          const data = Buffer.from(db.prepare('SELECT CAST(data AS BLOB) FROM events WHERE position = ?').pluck().get(position) as Buffer);
          const i = change.at % data.length;
          data[i] = data[i]! ^ change.xor;
          db.prepare('UPDATE events SET data = ? WHERE position = ?').run(data, position);
        });
        const kinds: readonly (TamperKind | null)[] = change.kind === 'byte' ? ['changed'] : position === total ? ['truncated'] : ['gap'];
        assert.ok(kinds.includes(found.kind), `${change.kind} at ${position}: found ${found.kind} at ${found.position}`);
        assert.equal(found.position, position);
      },
    ),
    { numRuns: 60, seed },
  );
});
