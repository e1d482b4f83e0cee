import { setImmediate as nextTurn } from 'node:timers/promises';
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { addCells, ageBounds, timeSql } from '../storeStats.ts';
import type { AgeBucket, StatsCell, StorageSize, StoreStats, StoreStatsOptions } from '../storeStats.ts';

// EventStore.stats for SQLite (storeStats.ts): one GROUP BY per window of positions, through the
// primary key, so a large file neither needs an index of its own nor holds the event loop for the
// whole scan; between windows the loop is free and the caller hears how far it got.

/** Positions per query: a few tens of milliseconds of JSON reading each. */
const windowSize = 50_000n;

export function createSqliteStats(conn: Database.Database, path: string): (options: StoreStatsOptions) => Promise<StoreStats> {
  const time = timeSql((name) => `json_extract(data, '$.${name}')`);
  const cellsIn = conn
    .prepare(
      `SELECT type, CASE WHEN t >= ? THEN 'day' WHEN t >= ? THEN 'week' WHEN t >= ? THEN 'month' ELSE 'older' END AS age, ` +
        `count(*) AS events, sum(length(CAST(data AS BLOB)) + length(CAST(metadata AS BLOB))) AS bytes ` +
        `FROM (SELECT type, data, metadata, ${time} AS t FROM events WHERE position > ? AND position <= ?) GROUP BY type, age`,
    )
    .safeIntegers(false);
  const head = conn.prepare('SELECT max(position) FROM events').pluck().safeIntegers();

  return async ({ now, onProgress }) => {
    const bounds = ageBounds(now);
    const last = (head.get() as bigint | null) ?? 0n;
    const cells = new Map<string, { type: string; age: AgeBucket; events: number; bytes: number }>();
    for (let after = 0n; after < last; after += windowSize) {
      const upTo = after + windowSize;
      addCells(cells, cellsIn.all(bounds.day, bounds.week, bounds.month, after, upTo) as StatsCell[]);
      onProgress?.(upTo < last ? upTo : last, last);
      // Let the event loop run between windows (a serve's requests, a progress line).
      await nextTurn();
    }
    return { cells: [...cells.values()], storage: storageOf(path) };
  };
}

function storageOf(path: string): StorageSize[] {
  if (path === '' || path === ':memory:') return [];
  const file = resolve(path);
  const out: StorageSize[] = [{ kind: 'file', name: file, bytes: statSync(file).size }];
  // The write-ahead log holds commits not yet checkpointed into the file.
  const wal = `${file}-wal`;
  if (existsSync(wal)) out.push({ kind: 'file', name: wal, bytes: statSync(wal).size });
  return out;
}
