import type Database from 'better-sqlite3';
import type { Recorded } from '../../core/events/index.ts';
import { decodeStoredData } from '../decodeStored.ts';
import { metadataJson } from '../appendRules.ts';
import { eventKind } from '../nodeColumns.ts';

// The SQLite store's read statements, prepared once per handle (work done when built, not on
// the hot path), and what turns their rows into Recorded events.

/** A row as `.raw()` hands it back, in the order of `selected`: no object with named keys per row. */
export type Row = [
  position: bigint,
  id: string,
  stream: string,
  revision: bigint,
  type: string | number,
  data: string,
  metadata: string | null,
];
/** The node events' types by the number the read query gives them. */
const typeNames: readonly string[] = ['', 'DeclarationSent', 'ReportReceived', 'AliveSeen'];
const at = { position: 0, id: 1, stream: 2, revision: 3, type: 4, data: 5, metadata: 6 } as const;

/**
 * The columns of a Row. The three node events' type as a number (a REAL: safeIntegers leaves it a
 * number) and this version's metadata as NULL: no string made per row for either (decode maps them back).
 */
export const selected =
  `position, id, stream, revision, CASE type WHEN 'AliveSeen' THEN 3.0 WHEN 'ReportReceived' THEN 2.0 WHEN 'DeclarationSent' THEN 1.0 ELSE type END, ` +
  `data, CASE WHEN metadata = '${metadataJson.replaceAll("'", "''")}' THEN NULL ELSE metadata END`;

export type ReadQueries = ReturnType<typeof prepareReadQueries>;

export function prepareReadQueries(conn: Database.Database) {
  return {
    // Bounded by position in the query, not after it: the LIMIT counts durable rows only (group commit).
    forwards: conn
      .prepare(`SELECT ${selected} FROM events WHERE stream = ? AND revision >= ? AND position <= ? ORDER BY revision LIMIT ?`)
      .raw()
      .safeIntegers(),
    backwards: conn
      .prepare(`SELECT ${selected} FROM events WHERE stream = ? AND revision <= ? AND position <= ? ORDER BY revision DESC LIMIT ?`)
      .raw()
      .safeIntegers(),
    after: conn.prepare(`SELECT ${selected} FROM events WHERE position > ? ORDER BY position LIMIT ?`).raw().safeIntegers(),
    afterPrefix: conn
      .prepare(`SELECT ${selected} FROM events WHERE position > ? AND position <= ? AND substr(stream, 1, ?) = ? ORDER BY position LIMIT ?`)
      .raw()
      .safeIntegers(),
    // A prefix few events carry (`rollout-`: a handful of rollouts beside 100,000 node streams) is read
    // through the (stream, revision) index and sorted, instead of scanning the log for it, which
    // slowed every warm start of a large store. `prefixCount` tells which prefix is rare,
    // reading at most rarePrefixRows (sqliteReads.ts) index entries.
    afterPrefixByStream: conn
      .prepare(`SELECT ${selected} FROM events WHERE stream >= ? AND stream < ? AND +position > ? ORDER BY +position LIMIT ?`)
      .raw()
      .safeIntegers(),
    prefixCount: conn.prepare('SELECT count(*) FROM (SELECT 1 FROM events WHERE stream >= ? AND stream < ? LIMIT ?)').pluck(),
    // readColumns (sqliteColumnsFast.ts): the kind decided in SQL, whether the metadata is this
    // version's compared there, the id only of a report, integers as numbers: no type or metadata
    // string, no bigint per row. A row the fast checks do not take is read again whole (`row`).
    columns: conn
      .prepare(
        `SELECT position, revision, CASE type WHEN 'AliveSeen' THEN ${eventKind.alive} WHEN 'ReportReceived' THEN ${eventKind.report} ` +
          `WHEN 'DeclarationSent' THEN ${eventKind.send} WHEN 'NodeHeard' THEN ${eventKind.heard} WHEN 'NodeSilent' THEN ${eventKind.silent} ` +
          `WHEN 'NodeRetired' THEN ${eventKind.retire} ELSE ${eventKind.other} END, data, metadata = ?, stream, ` +
          `CASE type WHEN 'ReportReceived' THEN id END FROM events WHERE position > ? AND position <= ? ORDER BY position LIMIT ?`,
      )
      .raw(),
    row: conn.prepare('SELECT type, data, metadata, id, stream, revision FROM events WHERE position = ?').raw(),
    head: conn.prepare('SELECT max(position) FROM events').pluck().safeIntegers(),
    // EventStore.findSend, through the events_sent_digest index (sqliteSchema.ts, v3).
    findSend: conn.prepare(
      "SELECT json_extract(data, '$.serial') AS serial, json_extract(data, '$.sentAt') AS sentAt FROM events WHERE type = 'DeclarationSent' AND stream = ? AND json_extract(data, '$.digest') = ? AND position <= ? ORDER BY position DESC LIMIT 1",
    ),
    getCheckpoint: conn.prepare('SELECT position FROM checkpoints WHERE name = ?').pluck().safeIntegers(),
    lastSeenNodes: conn.prepare('SELECT node, ms FROM last_seen'),
    lastSeenFlushes: conn.prepare('SELECT engine, ms FROM last_seen_flushes'),
  };
}

export type RowDecoder = Readonly<{
  /** A row's metadata (null: this version's) parsed. */
  metadataOf: (text: string | null) => unknown;
  /** One object per event: the data checked (decodeFast.ts, else zod) and the Recorded built as one literal. */
  decode: (r: Row) => Recorded;
}>;

export function createRowDecoder(): RowDecoder {
  // Nearly every stored event has the same metadata text; parse it once. The text this version
  // writes is compared first: a short string compare, where a Map lookup hashes the row's fresh string.
  const metadataCache = new Map<string, unknown>();
  const currentMetadata = JSON.parse(metadataJson) as unknown;
  const metadataOf = (text: string | null): unknown => {
    if (text === null || text === metadataJson) return currentMetadata;
    let meta = metadataCache.get(text);
    if (meta === undefined) {
      meta = JSON.parse(text) as unknown;
      if (metadataCache.size < 64) metadataCache.set(text, meta);
    }
    return meta;
  };
  const decode = (r: Row): Recorded => {
    const code = r[at.type];
    const type = typeof code === 'number' ? typeNames[code]! : code;
    return {
      type,
      data: decodeStoredData(type, JSON.parse(r[at.data]), metadataOf(r[at.metadata]), {
        position: r[at.position],
        stream: r[at.stream],
        id: r[at.id],
      }),
      id: r[at.id],
      stream: r[at.stream],
      revision: r[at.revision],
      position: r[at.position],
    } as Recorded;
  };
  return { metadataOf, decode };
}

/** Decode rows until `maxBytes` of stored JSON (or the rows) run out; `cut` says rows were left unread. */
export function decodeUpTo(
  rows: IterableIterator<unknown>,
  decode: (r: Row) => Recorded,
  maxBytes: number,
): { events: Recorded[]; cut: boolean } {
  const events: Recorded[] = [];
  let bytes = 0;
  for (const r of rows as IterableIterator<Row>) {
    events.push(decode(r));
    bytes += r[at.data].length;
    if (bytes >= maxBytes) return { events, cut: true }; // leaving for…of ends the statement's iteration
  }
  return { events, cut: false };
}
