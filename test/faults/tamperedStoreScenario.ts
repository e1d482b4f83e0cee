import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import type { TamperKind } from '../../src/core/audit/verifyLog.ts';
import { storedLeafHash } from '../../src/store/audit/auditTree.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { verifyStore, writeHistory } from '../support/auditHistory.ts';
import { auditScenarioResult, faultSeed } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// The insider with the SQLite file in hand (docs/audit.md#threat-model): one SQL statement
// changes the stored past, and the audit verification (`converge audit verify`) must name the
// first position it touched and how. Each case starts from a copy of one store written through
// the store's own appends (declarations sent, the nodes' reports of them, alives: what the
// engine writes). Shared by tamperedStore.test.ts and report.ts (RELIABILITY.md).

export type Found = Readonly<{ kind: TamperKind | null; position: bigint | null; message: string }>;
type Change = (db: Database.Database) => void;

export type TamperLab = Readonly<{
  /** Events in the pristine store (positions 1…total). */
  total: bigint;
  /** A copy of the pristine store, changed by `change` through a bare SQLite connection, then verified. */
  tampered: (change: Change) => Promise<Found>;
  remove: () => void;
}>;

export async function createTamperLab(nodes = 8): Promise<TamperLab> {
  const dir = mkdtempSync(join(tmpdir(), 'converge-tamper-'));
  const pristine = join(dir, 'pristine.db');
  const store = createSqliteEventStore(pristine);
  await writeHistory(store, nodes);
  await writeHistory(store, nodes, 1);
  await store.close();
  let copies = 0;
  return {
    total: BigInt(nodes * 3 * 2),
    async tampered(change) {
      const path = join(dir, `copy${++copies}.db`);
      copyFileSync(pristine, path);
      const db = new Database(path);
      change(db);
      db.close();
      const copy = createSqliteEventStore(path);
      try {
        const { finding } = await verifyStore(copy, 5);
        return { kind: finding?.kind ?? null, position: finding?.position ?? null, message: finding?.message ?? '' };
      } finally {
        await copy.close();
        rmSync(path, { force: true });
      }
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The position of the n-th stored report (1-based). */
const nthReport = (db: Database.Database, n: number): bigint =>
  db
    .prepare("SELECT position FROM events WHERE type = 'ReportReceived' ORDER BY position LIMIT 1 OFFSET ?")
    .pluck()
    .safeIntegers()
    .get(n - 1) as bigint;

export type TamperCase = Readonly<{
  name: string;
  change: Change;
  expect: (lab: TamperLab, db: Database.Database) => [TamperKind, bigint];
}>;

/** What the insider does, and what verify must answer (the kind, and the first position touched). */
export const tamperCases = (total: bigint): TamperCase[] => [
  {
    name: "a stored report's declared digest changed (UPDATE)",
    change: (db) =>
      db.prepare("UPDATE events SET data = json_set(data, '$.declared', ?) WHERE position = ?").run('f'.repeat(64), nthReport(db, 5)),
    expect: (_, db) => ['changed', nthReport(db, 5)],
  },
  { name: 'an event deleted', change: (db) => db.prepare('DELETE FROM events WHERE position = 7').run(), expect: () => ['gap', 7n] },
  {
    name: 'a forged report inserted, with the leaf hash the store would have written',
    change: (db) => {
      const r = db
        .prepare("SELECT stream, revision, data, metadata FROM events WHERE type = 'ReportReceived' ORDER BY position DESC LIMIT 1")
        .get() as { stream: string; revision: number; data: string; metadata: string };
      const data = JSON.stringify({ ...JSON.parse(r.data), declared: 'e'.repeat(64) });
      const leaf = storedLeafHash(total + 1n, r.stream, BigInt(r.revision + 10), 'ReportReceived', data, r.metadata);
      db.prepare('INSERT INTO events (position, id, stream, revision, type, data, metadata, leaf) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(
        total + 1n,
        'forged-report',
        r.stream,
        r.revision + 10,
        'ReportReceived',
        data,
        r.metadata,
        leaf,
      );
    },
    expect: () => ['inserted', total + 1n],
  },
  {
    name: 'two events swapped',
    change: (db) => {
      db.exec('UPDATE events SET position = -position WHERE position IN (10, 11)');
      db.exec('UPDATE events SET position = 11 WHERE position = -10');
      db.exec('UPDATE events SET position = 10 WHERE position = -11');
    },
    expect: () => ['moved', 10n],
  },
  {
    name: 'the tail truncated',
    change: (db) => db.prepare('DELETE FROM events WHERE position > ?').run(total - 3n),
    expect: () => ['truncated', total - 2n],
  },
];

/** One byte of one event's stored data changed, or one event deleted: the property's change. */
export type RandomTamper =
  Readonly<{ position: bigint; kind: 'byte'; at: number; xor: number }> | Readonly<{ position: bigint; kind: 'delete' }>;

export const randomTamperArb = (total: bigint): fc.Arbitrary<RandomTamper> =>
  fc.oneof(
    fc.record({
      position: fc.bigInt({ min: 1n, max: total }),
      kind: fc.constant('byte' as const),
      at: fc.nat(),
      xor: fc.integer({ min: 1, max: 255 }),
    }),
    fc.record({ position: fc.bigInt({ min: 1n, max: total }), kind: fc.constant('delete' as const) }),
  );

export const applyRandomTamper =
  (t: RandomTamper): Change =>
  (db) => {
    if (t.kind === 'delete') return void db.prepare('DELETE FROM events WHERE position = ?').run(t.position);
    const data = Buffer.from(db.prepare('SELECT CAST(data AS BLOB) FROM events WHERE position = ?').pluck().get(t.position) as Buffer);
    const i = t.at % data.length;
    data[i] = data[i]! ^ t.xor;
    // The index of sends by digest reads each declaration's JSON: bytes that are no longer JSON
    // make SQLite refuse the UPDATE, so the insider drops the index first, as one would.
    db.exec('DROP INDEX IF EXISTS events_sent_digest');
    db.prepare('UPDATE events SET data = ? WHERE position = ?').run(data, t.position);
  };

/** The kinds verify may answer for a random tamper (a deleted last event is a truncated tail). */
export const expectedKind = (t: RandomTamper, total: bigint): TamperKind =>
  t.kind === 'byte' ? 'changed' : t.position === total ? 'truncated' : 'gap';

export const tamperedStore: Scenario = {
  name: 'tampered store',
  faults:
    "the SQLite file changed by SQL between runs: a report's declared digest (UPDATE), an event deleted, a forged report inserted with a valid leaf hash, two events swapped, the tail truncated, and one random byte of one event's data or one event deleted (fast-check)",
  async run(): Promise<ScenarioResult> {
    const lab = await createTamperLab();
    const runs = Number(process.env['CONVERGE_FAULT_TAMPER_RUNS'] ?? 40);
    const seed = faultSeed('tampered store');
    const checks: Record<string, boolean> = {};
    let tried = 0;
    let missed = 0;
    try {
      for (const c of tamperCases(lab.total)) {
        tried++;
        const found = await lab.tampered(c.change);
        // The expected position is read from an untouched copy (the fifth report's position).
        let want: [TamperKind, bigint] = ['changed', 0n];
        await lab.tampered((db) => void (want = c.expect(lab, db)));
        const ok = found.kind === want[0] && found.position === want[1];
        if (!ok) missed++;
        checks[`${c.name} → ${want[0]} at ${want[1]}`] = ok;
      }
      const samples = fc.sample(randomTamperArb(lab.total), { numRuns: runs, seed });
      let randomFound = 0;
      for (const t of samples) {
        tried++;
        const found = await lab.tampered(applyRandomTamper(t));
        if (found.kind === expectedKind(t, lab.total) && found.position === t.position) randomFound++;
        else missed++;
      }
      checks[`random byte or deletion found at its position (${randomFound}/${samples.length})`] = randomFound === samples.length;
      const events = Number(lab.total);
      return auditScenarioResult(this, {
        events,
        tried,
        missed,
        notes: [
          `seed ${seed}`,
          `${events} events written through the store's appends; each tampering on a fresh copy, checked by the audit verification (converge audit verify)`,
          'hostile tried = tamperings, hostile appended = tamperings not found at their first position and kind',
          'no recovery: a tampered store is reported, not repaired',
        ],
        checks,
      });
    } finally {
      lab.remove();
    }
  },
};
