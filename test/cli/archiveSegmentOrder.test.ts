import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { archivableFleetIn } from '../support/archivableFleet.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';

// docs/audit.md "How the move fills it": the back-fill of a segment's summary places it by the
// order the segments were archived in. A later run can archive rows that all lie below an earlier
// segment's last position (a node sent again, so its former last send is no longer kept hot): that
// segment's leaf range is empty. When the clock gives both manifest rows the same time (SQLite keeps
// milliseconds), or the later one an earlier time (a clock stepped back), the order must still be
// the one they were archived in, not the one their last positions or their times suggest.

/** A store the CLI names, opened in process, and SQL run on it (`?` placeholders). */
type Lab = Readonly<{
  args: readonly string[];
  open: () => EventStore;
  sql: (text: string, params: readonly unknown[]) => Promise<Record<string, unknown>[]>;
}>;

const headerTree = (file: string): { first: number; end: number } => {
  const bytes = readFileSync(file);
  return JSON.parse(bytes.subarray(0, bytes.indexOf(10)).toString('utf8')).tree;
};

function segmentOrderSuite(dir: string, lab: (work: string) => Promise<Lab>): void {
  for (const [name, clock] of [
    ['the same time', (first: Date) => first],
    ['a clock stepped back', (first: Date) => new Date(first.getTime() - 3_600_000)],
  ] as const) {
    test(`a segment archived later below an earlier one's last position gets its own summary back, its manifest time ${name}`, async () => {
      const work = mkdtempSync(join(dir, 'store-'));
      const { args: store, open, sql } = await lab(work);
      const archive = ['--archive-dir', join(work, 'archive')];
      const run = async (): Promise<string> => {
        const r = await cliIn(work, ['store', 'archive', '--older-than', '5d', ...archive, ...store, '--json']);
        assert.equal(r.code, 0, r.stderr);
        const files = JSON.parse(r.stdout).files as string[];
        assert.equal(files.length, 1, r.stdout);
        return files[0]!;
      };
      const first = await run();
      // n3 is sent again: its former last send, long below the first segment's last position, is archived next.
      const s = open();
      await historyInStore(s, Date.now()).send('n3');
      await s.close();
      const second = await run();

      const rows = await sql('SELECT file, to_position, archived_at FROM archive_segments', []);
      const at = (file: string) => rows.find((r) => r['file'] === file)!;
      assert.ok(BigInt(at(second)['to_position'] as number) < BigInt(at(first)['to_position'] as number), JSON.stringify(rows));
      // The second as a release that kept no summary left it, its manifest time as the clock gave it.
      await sql('UPDATE archive_segments SET archived_at = ? WHERE file = ?', [
        clock(new Date(at(first)['archived_at'] as string)).toISOString(),
        second,
      ]);
      await sql('DELETE FROM archive_segment_summaries WHERE file = ?', [second]);

      const filled = await cliIn(work, ['audit', 'verify', '--json', ...store, ...archive]);
      assert.equal(filled.code, 0, filled.stdout + filled.stderr);
      assert.equal(JSON.parse(filled.stdout).summariesWritten, 1);
      // Verified again, the summary it wrote is checked beside the others.
      const again = await cliIn(work, ['audit', 'verify', ...store, ...archive]);
      assert.equal(again.code, 0, again.stdout + again.stderr);
      const [stored] = await sql('SELECT first_leaf, end_leaf FROM archive_segment_summaries WHERE file = ?', [second]);
      const header = headerTree(join(work, 'archive', second));
      assert.equal(header.first, header.end, 'the move gave it an empty leaf range');
      assert.deepEqual(
        { first: Number(stored!['first_leaf']), end: Number(stored!['end_leaf']) },
        { first: header.first, end: header.end },
        'the back-fill gives it the same',
      );
    });
  }
}

describe('segment order on a SQLite store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-segment-order-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  segmentOrderSuite(dir, async (work) => {
    const path = join(work, 'fleet.db');
    await archivableFleetIn(createSqliteEventStore(path), `${path}.snapshot`);
    return {
      args: ['--store', `sqlite:${path}`],
      open: () => createSqliteEventStore(path),
      sql: async (text, params) => {
        const db = new Database(path);
        try {
          const st = db.prepare(text);
          return st.reader ? (st.all(...params) as Record<string, unknown>[]) : (st.run(...params), []);
        } finally {
          db.close();
        }
      },
    };
  });
});

describeOnPostgres('segment order on a PostgreSQL store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'converge-segment-order-pg-'));
  const schemas: ReturnType<typeof scratchSchema>[] = [];
  after(async () => {
    for (const s of schemas) await s.drop();
    rmSync(dir, { recursive: true, force: true });
  });
  segmentOrderSuite(dir, async (work) => {
    const scratch = scratchSchema('converge_segorder');
    schemas.push(scratch);
    const snapshot = join(work, 'fleet.snapshot');
    await archivableFleetIn(createPostgresEventStore(scratch.url), snapshot);
    return {
      args: ['--store', scratch.url, '--snapshot', snapshot],
      open: () => createPostgresEventStore(scratch.url),
      sql: async (text, params) => {
        const client = new pg.Client({ connectionString: scratch.url.replace(/\?.*$/, '') });
        await client.connect();
        try {
          await client.query(`SET search_path TO ${scratch.schema}`);
          let n = 0;
          const rows = (
            await client.query(
              text.replace(/\?/g, () => `$${++n}`),
              [...params],
            )
          ).rows as Record<string, unknown>[];
          return rows.map((r) => (r['archived_at'] instanceof Date ? { ...r, archived_at: r['archived_at'].toISOString() } : r));
        } finally {
          await client.end();
        }
      },
    };
  });
});
