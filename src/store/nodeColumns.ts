import type { Recorded } from '../core/events/index.ts';
import { exactNumber, isoMs, nodeOfStream } from '../core/events/index.ts';
import { isDigest, isIntArray, isRolloutTag, isSentEarlier, isStringArray, isStringMap, isTransport } from '../core/events/decodeFast.ts';
import type {
  AliveSeenData,
  DeclarationSentData,
  NodeHeardData,
  NodeRetiredData,
  NodeSilentData,
  ReportReceivedData,
} from '../core/events/index.ts';
import type { EventStore, NodeColumns, ReadAllOptions, ReadColumnsOptions } from './port.ts';

// The read the bulk folds take: a replay from zero (`replay --verify`) and a cold
// start's catch-up (ReadModel.catchUpColumns). Instead of one Recorded per event — a bigint
// position and revision, the whole data object, a wrapper — a page of events as columns: for each
// event its kind, position and revision as numbers, its node, and the fields the node fold reads
// (projections/node/nodeStateFast.ts: draftSend, draftReport, draftAlive), its time as milliseconds when
// isoMs reads the text. The page's arrays are reused from page to page: nothing of an event the
// fold does not keep outlives its row, and a young-generation GC finds little to copy.
//
// Every row is checked as `readAll` checks it (decodeEventData: the fast check of decodeFast.ts,
// else the upcasters and zod), so a page holds only valid events; a row the check refuses throws
// as readAll throws. EventStore.readColumns is defined by columnsFromReadAll below (readAll's
// batches in columns: correct, and no faster than readAll), which memory, PostgreSQL and
// EventStoreDB return as theirs; the SQLite store reads its pages itself and must equal it
// (sqlite/sqliteColumnsFast.ts: fewer columns, integers as numbers, the metadata compared in SQL;
// the property test in test/readModel/columns.property.test.ts holds them equal).

/**
 * An event's kind in a page: the node events; `ignored` for one no fold reads (an audit
 * checkpoint, written every few thousand events, an observation span's start or stop: the bulk
 * fold goes past it); `other` for anything
 * else (a rollout's). A liveness transition's time is a sign of life to the node fold, as an
 * alive's: NodeHeard's `at`, NodeSilent's `lastSeenAt` go in `time`. `retire`: NodeRetired.
 */
export const eventKind = { other: 0, send: 1, report: 2, alive: 3, ignored: 4, heard: 5, silent: 6, retire: 7 } as const;

export function createNodeColumns(capacity: number): NodeColumns {
  return {
    length: 0,
    kind: new Uint8Array(capacity),
    position: new Float64Array(capacity),
    revision: new Float64Array(capacity),
    node: new Array<string>(capacity).fill(''),
    streamNode: new Array<string | null>(capacity).fill(null),
    id: new Array<string>(capacity).fill(''),
    time: new Float64Array(capacity),
    timeText: new Array<string | null>(capacity).fill(null),
    digest: new Array<string | null>(capacity).fill(null),
    specDigest: new Array<string>(capacity).fill(''),
    serial: new Float64Array(capacity),
    ids: new Array<readonly string[]>(capacity).fill([]),
    failed: new Array<Readonly<Record<string, string>>>(capacity).fill({}),
    refused: new Array<string>(capacity).fill(''),
    carried: new Array<readonly number[]>(capacity).fill([]),
  };
}

/** The node the stream names: `node` itself when the stream is its own (no new string). */
export function streamNodeOf(stream: string, node: string): string | null {
  if (stream.length === node.length + 5 && stream.startsWith('node-') && stream.endsWith(node)) return node;
  return nodeOfStream(stream);
}

/**
 * Put one event at entry i: its position, revision, stream and validated data (what decodeEventData
 * returns, or a fast check accepted). `data` of another kind than the three node events is not read.
 */
export function putEvent(
  c: NodeColumns,
  i: number,
  kind: number,
  position: number | bigint,
  revision: number | bigint,
  stream: string,
  id: string,
  data: unknown,
): void {
  c.kind[i] = kind;
  c.position[i] = exactNumber(position);
  c.revision[i] = exactNumber(revision);
  if (kind === eventKind.other || kind === eventKind.ignored) {
    c.node[i] = '';
    c.streamNode[i] = nodeOfStream(stream);
    return;
  }
  const node = (data as { node: string }).node;
  c.node[i] = node;
  c.streamNode[i] = streamNodeOf(stream, node);
  let text: string;
  if (kind === eventKind.send) {
    const x = data as DeclarationSentData;
    c.digest[i] = x.digest;
    c.specDigest[i] = x.specDigest;
    c.serial[i] = x.serial;
    c.ids[i] = x.resourceIds;
    text = x.sentAt;
  } else if (kind === eventKind.report) {
    const x = data as ReportReceivedData;
    c.id[i] = id;
    c.digest[i] = x.declared;
    c.ids[i] = x.applied;
    c.failed[i] = x.failed;
    c.refused[i] = x.refused;
    c.carried[i] = x.carried;
    // A report's serial column: the serial of the earlier send ingest found (0: none, or not looked up).
    c.serial[i] = x.sentEarlier?.serial ?? 0;
    text = x.receivedAt;
  } else if (kind === eventKind.heard) text = (data as NodeHeardData).at;
  else if (kind === eventKind.silent) text = (data as NodeSilentData).lastSeenAt;
  else if (kind === eventKind.retire) text = (data as NodeRetiredData).at;
  else text = (data as AliveSeenData).seenAt;
  const ms = isoMs(text);
  c.time[i] = ms;
  c.timeText[i] = ms === ms ? null : text;
}

/** A time the schema takes (a string Date.parse reads) into entry i; false for anything else. */
function putTime(c: NodeColumns, i: number, t: unknown): boolean {
  if (typeof t !== 'string') return false;
  const ms = isoMs(t);
  if (ms !== ms) {
    if (Number.isNaN(Date.parse(t))) return false;
    c.timeText[i] = t;
  } else c.timeText[i] = null;
  c.time[i] = ms;
  return true;
}

/** The last spec digest putFastData found to be a digest. */
let lastSpec: unknown = null;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The fast checks of a columnar read: JSON.parse's `x` of a current-version row of this kind into
 * entry i, true when the event's schema (events.ts) takes it — every field checked, the ones the
 * fold does not read too — and false ("decode it whole") for anything else. Unlike decodeFast.ts
 * they need not count keys: zod would strip a key it does not name, and a page holds named
 * fields only. Position, revision and the nodes are put by the caller.
 */
export function putFastData(c: NodeColumns, i: number, kind: number, x: unknown, id: string): boolean {
  if (!isObject(x)) return false;
  const node = x.node;
  if (typeof node !== 'string' || node.length === 0) return false;
  if (kind === eventKind.alive) {
    if (!putTime(c, i, x.seenAt)) return false;
  } else if (kind === eventKind.heard) {
    const before = x.lastSeenBefore;
    if (!(before === null || (typeof before === 'string' && !Number.isNaN(Date.parse(before)))) || !putTime(c, i, x.at)) return false;
  } else if (kind === eventKind.silent) {
    const grace = x.graceMs;
    if (typeof x.observedAt !== 'string' || Number.isNaN(Date.parse(x.observedAt))) return false;
    if (!Number.isSafeInteger(grace) || (grace as number) < 1 || !putTime(c, i, x.lastSeenAt)) return false;
  } else if (kind === eventKind.retire) {
    if (typeof x.reason !== 'string' || !putTime(c, i, x.at)) return false;
  } else if (kind === eventKind.report) {
    const declared = x.declared;
    if (!(declared === null || isDigest(declared)) || !isStringArray(x.applied) || !isStringMap(x.failed)) return false;
    if (typeof x.refused !== 'string' || !isIntArray(x.carried) || !isTransport(x.transport) || !putTime(c, i, x.receivedAt)) return false;
    const earlier = x.sentEarlier;
    if (earlier !== undefined && earlier !== null && !isSentEarlier(earlier)) return false;
    c.serial[i] = earlier === undefined || earlier === null ? 0 : (earlier as { serial: number }).serial;
    c.id[i] = id;
    c.digest[i] = declared as string | null;
    c.ids[i] = x.applied as string[];
    c.failed[i] = x.failed as Record<string, string>;
    c.refused[i] = x.refused;
    c.carried[i] = x.carried as number[];
  } else if (kind === eventKind.send) {
    const serial = x.serial;
    const spec = x.specDigest;
    // A spec digest is that of many sends in a row (a rollout's wave): the last one checked is checked.
    if (spec !== lastSpec) {
      if (!isDigest(spec)) return false;
      lastSpec = spec as string;
    }
    if (!Number.isSafeInteger(serial) || (serial as number) < 1 || !isDigest(x.digest)) return false;
    if (typeof x.declaration !== 'string' || typeof x.signature !== 'string' || typeof x.keyId !== 'string') return false;
    if (!isStringArray(x.resourceIds) || (x.rollout !== undefined && !isRolloutTag(x.rollout)) || !putTime(c, i, x.sentAt)) return false;
    c.digest[i] = x.digest as string;
    c.specDigest[i] = x.specDigest as string;
    c.serial[i] = serial as number;
    c.ids[i] = x.resourceIds as string[];
  } else return false;
  c.kind[i] = kind;
  c.node[i] = node;
  return true;
}

export const kindOfType = (type: string): number =>
  type === 'AliveSeen'
    ? eventKind.alive
    : type === 'ReportReceived'
      ? eventKind.report
      : type === 'DeclarationSent'
        ? eventKind.send
        : type === 'NodeHeard'
          ? eventKind.heard
          : type === 'NodeSilent'
            ? eventKind.silent
            : type === 'NodeRetired'
              ? eventKind.retire
              : type === 'AuditCheckpointed' || type === 'ObservationStarted' || type === 'ObservationStopped'
                ? eventKind.ignored
                : eventKind.other;

/** Put the decoded events `events` in `c`, from entry 0 (what a store without a columnar read hands out). */
export function columnsOf(events: readonly Recorded[], c: NodeColumns = createNodeColumns(events.length)): NodeColumns {
  if (c.kind.length < events.length) c = createNodeColumns(events.length);
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    putEvent(c, i, kindOfType(e.type), e.position, e.revision, e.stream, e.id, e.data);
  }
  c.length = events.length;
  return c;
}

/**
 * Pages of the store's events as columns, in position order (EventStore.readColumns). A page is
 * valid until the next is asked for: its arrays are reused.
 */
export function readNodeColumns(store: EventStore, options: ReadColumnsOptions = {}): AsyncIterable<NodeColumns> {
  return store.readColumns(options);
}

/** The definition of EventStore.readColumns: each batch of the store's readAll put in columns. */
export async function* columnsFromReadAll(store: EventStore, options: ReadColumnsOptions = {}): AsyncIterable<NodeColumns> {
  const opts: ReadAllOptions = {
    ...(options.after === undefined ? {} : { after: options.after }),
    ...(options.streamPrefix === undefined ? {} : { streamPrefix: options.streamPrefix }),
  };
  let c = createNodeColumns(0);
  for await (const batch of store.readAll(opts)) {
    c = columnsOf(batch, c);
    yield c;
  }
}
