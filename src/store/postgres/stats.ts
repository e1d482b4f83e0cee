import type { QueryConfig } from 'pg';
import { addCells, ageBounds, timeSql } from '../storeStats.ts';
import type { AgeBucket, StatsCell, StoreStats, StoreStatsOptions } from '../storeStats.ts';

// EventStore.stats for PostgreSQL (storeStats.ts): one GROUP BY per window of positions through
// the primary key, so no index is needed and the scan's progress can be told. Times compare in the
// "C" collation: a locale's collation may weigh punctuation differently, and the buckets must be
// the same byte-wise comparison SQLite and memory make.

const windowSize = 200_000n;

type Statement = (...values: unknown[]) => QueryConfig;
type Run = (config: QueryConfig) => Promise<{ rows: unknown[][] }>;

export const statsSql = (s: string): string => {
  const time = timeSql((name) => `(data->>'${name}')`);
  return (
    `SELECT type, CASE WHEN t >= $1 THEN 'day' WHEN t >= $2 THEN 'week' WHEN t >= $3 THEN 'month' ELSE 'older' END AS age, ` +
    `count(*)::float8, sum(octet_length(data::text) + octet_length(metadata::text))::float8 ` +
    `FROM (SELECT type, data, metadata, (${time}) COLLATE "C" AS t FROM ${s}.events WHERE position > $4 AND position <= $5) w GROUP BY 1, 2`
  );
};

export const storageSql = (s: string): string => `SELECT pg_total_relation_size('${s}.events')::float8`;

export async function postgresStats(
  run: Run,
  q: Readonly<{ stats: Statement; storage: Statement; head: Statement }>,
  schema: string,
  { now, onProgress }: StoreStatsOptions,
): Promise<StoreStats> {
  const bounds = ageBounds(now);
  const last = BigInt(((await run(q.head())).rows[0]?.[0] as bigint | string | undefined) ?? 0);
  const cells = new Map<string, { type: string; age: AgeBucket; events: number; bytes: number }>();
  for (let after = 0n; after < last; after += windowSize) {
    const upTo = after + windowSize;
    const rows = (await run(q.stats(bounds.day, bounds.week, bounds.month, String(after), String(upTo)))).rows;
    addCells(
      cells,
      rows.map(([type, age, events, bytes]) => ({ type, age, events, bytes }) as StatsCell),
    );
    onProgress?.(upTo < last ? upTo : last, last);
  }
  const size = (await run(q.storage())).rows[0]?.[0] as number;
  return { cells: [...cells.values()], storage: [{ kind: 'table', name: `${schema}.events`, bytes: size }] };
}
