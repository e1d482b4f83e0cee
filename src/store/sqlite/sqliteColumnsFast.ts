import { exactNumber } from '../../core/events/index.ts';
import { decodeStoredData } from '../decodeStored.ts';
import { metadataJson } from '../appendRules.ts';
import { createNodeColumns, eventKind, kindOfType, putEvent, putFastData, streamNodeOf } from '../nodeColumns.ts';
import type { NodeColumns, ReadColumnsOptions } from '../port.ts';
import type { Durability } from './sqliteDurability.ts';
import { sqliteError } from './sqliteErrors.ts';
import type { ReadQueries, RowDecoder } from './sqliteRows.ts';

// The SQLite store's EventStore.readColumns, read from the file itself: fewer columns, integers
// as numbers, the metadata compared in SQL, fused fast checks, other rows decoded whole. It must
// equal the definition, columnsFromReadAll (src/store/nodeColumns.ts: this store's readAll, each
// batch put in columns) entry for entry, or fail where readAll fails; the property test in
// test/readModel/columns.property.test.ts holds the two equal.

export type SqliteColumnsDeps = Readonly<{
  q: ReadQueries;
  decoder: RowDecoder;
  durability: Pick<Durability, 'readLimit'>;
  /** Throws once the store is closed. */
  open: () => void;
  readBatchSize: number;
  readBatchBytes: number;
}>;

type ColumnRow = [position: number, revision: number, kind: number, data: string, current: number, stream: string, id: string | null];

export function createSqliteColumnsReader(deps: SqliteColumnsDeps): (opts?: ReadColumnsOptions) => AsyncIterable<NodeColumns> {
  const { q, decoder, durability, open, readBatchSize, readBatchBytes } = deps;
  /** Slow rows of a page: entry and position, decoded after the page's query is done. */
  const slowRows: number[] = [];

  /**
   * One page into `c`: rows after `after` and up to `upTo`, at most readBatchSize rows or
   * readBatchBytes of stored JSON, those of streams outside `prefix` skipped unread. Each row is
   * checked as readAll checks it: this version's metadata and a fast check (decodeFast.ts) take
   * the parsed data as it is; any other row is read again whole and decoded by decodeEventData.
   * Returns the position of the last row looked at (0: none left; positions start at 1).
   */
  function readPage(c: NodeColumns, after: number, upTo: number, prefix: string | undefined): number {
    let n = 0;
    let lastScanned = 0;
    let bytes = 0;
    slowRows.length = 0;
    for (const r of q.columns.iterate(metadataJson, after, upTo, readBatchSize) as IterableIterator<ColumnRow>) {
      lastScanned = r[0];
      const stream = r[5];
      if (prefix !== undefined && !stream.startsWith(prefix)) continue;
      const kind = r[2];
      const text = r[3];
      bytes += text.length;
      if (kind !== eventKind.other && r[4] === 1 && putFastData(c, n, kind, JSON.parse(text), r[6] ?? '')) {
        c.position[n] = r[0];
        c.revision[n] = r[1];
        c.streamNode[n] = streamNodeOf(stream, c.node[n]!);
      } else {
        c.kind[n] = eventKind.other;
        slowRows.push(n, r[0]);
      }
      n++;
      if (bytes >= readBatchBytes) break; // leaving for…of ends the statement's iteration
    }
    // Positions climb, and a revision is at most its position: the last is the largest number here.
    exactNumber(lastScanned);
    for (let k = 0; k < slowRows.length; k += 2) putSlowRow(c, slowRows[k]!, slowRows[k + 1]!);
    c.length = n;
    return lastScanned;
  }

  /** The row at `position`, read again whole and decoded as readAll decodes it, into entry i. */
  function putSlowRow(c: NodeColumns, i: number, position: number): void {
    const [type, text, metadata, id, stream, revision] = q.row.get(position) as [string, string, string, string, string, number];
    const data = decodeStoredData(type, JSON.parse(text), decoder.metadataOf(metadata), { position, stream, id });
    putEvent(c, i, kindOfType(type), position, revision, stream, id, data);
  }

  return async function* readColumns(opts: ReadColumnsOptions = {}): AsyncIterable<NodeColumns> {
    const prefix = opts.streamPrefix;
    let after = opts.after === undefined || opts.after === null ? 0 : Number(opts.after);
    const c = createNodeColumns(readBatchSize);
    for (;;) {
      open();
      // Nothing past the oldest commit not yet synced (group commit), as readAll.
      const limit = durability.readLimit();
      let last: number;
      try {
        last = readPage(c, after, limit === null ? Number.MAX_SAFE_INTEGER : Number(limit), prefix);
      } catch (err) {
        throw sqliteError(err, 'read sqlite store');
      }
      if (last === 0) return;
      after = last;
      if (c.length > 0) yield c;
    }
  };
}
