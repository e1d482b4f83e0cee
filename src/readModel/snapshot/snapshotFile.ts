import { createHash } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { z } from 'zod';
import { foldVersion } from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import { ConvergeError } from '../../core/errors.ts';
import { readBinaryPartsV5 } from './binaryPartsV5.ts';
import { columnNames, sectionNames, SnapshotContentError, tableNames } from './columns.ts';
import { encodeColumnSliced, encodeTable } from './columnPartsSliced.ts';
import type { Part } from './columnParts.ts';
import { MissingPartError } from './decodeColumn.ts';
import { decodeStates } from './decodeStates.ts';
import type { DecodedStates } from './decodeStates.ts';
import { createEncoder } from './encoder.ts';
import { headerSchema4, readJsonLinesV4 } from './jsonLinesV4.ts';
import { encodeTransitions, transitionsPart } from './transitions.ts';

// Read-model snapshots: the folded states at one position. A snapshot is only a shortcut: it is
// restored only if it was made by a fold of the same version (projections/foldVersion.ts), from
// this store (the event at its position has the same id), and passes the checks of
// trust.ts. Anything else is discarded and the runner folds from zero — slower, never wrong.
//
// The file (format 6):
//   1. a header line, JSON: format, foldVersion, position, eventId, writtenAt, nodes, sections;
//   2. binary parts (columns.ts names them: the columns, then the tables, then each node's latest
//      liveness transition, transitions.ts; binaryPartsV5.ts reads them), each a little-endian
//      uint32 length, a JSON descriptor ["name", "kind", bytes], zero padding to a multiple of 8
//      bytes from the file's start (typed arrays read the data in place), then the data;
//   3. a newline and a trailer line, {"sha256": "<hex>"}: the sha256 of every byte before it.
// The checksum catches a torn, truncated or edited file; it is not a signature (whoever can write
// the file can reseal it), which is why the runner also checks sampled nodes against the store.
// Written to a temp file and renamed, so a crash leaves the old snapshot or the new one.

// 2: object keys starting with `$` are escaped; a format-1 file is discarded.
// 3: foldVersion is the number in projections/foldVersion.ts, no longer a hash of the fold's source.
// 4: columns and shared tables in lines with a sha256 trailer; every
//    section checked by a zod schema. A format-3 file (one JSON object) is discarded with a log line.
// 5: the same columns and tables as binary parts (typed arrays, one text per string column), read
//    without a JSON.parse per node, for a fast warm start. Format 4 (jsonLinesV4.ts) is still read.
// 6: format 5 and a last part, each node's latest recorded liveness transition, so a restored
//    engine without ingest judges a node as one that folded from zero (docs/design.md §3). Formats
//    4 and 5 are still read, with no transitions: a node is judged by grace until its next one.
export const snapshotFormat = 6;
/** Formats this engine reads: the one it writes and formats 4 and 5. */
const readable = [4, 5, 6];
export { foldVersion };

export type Snapshot = Readonly<{
  format: number;
  foldVersion: number;
  position: bigint;
  /** Id of the event at `position`: ties the snapshot to the store it was made from. */
  eventId: string;
  writtenAt: string;
  states: readonly NodeState[];
  /**
   * Each state's latest recorded liveness transition, in the states' order (transitions.ts's codes):
   * null when read from a format that keeps none; none when written without it.
   */
  transitions?: Uint8Array | null;
}>;

/** A snapshot as the runner restores it: its states checked and read in place, each built when first asked (decodeStates.ts). */
export type StoredSnapshot = Omit<Snapshot, 'states' | 'transitions'> & Readonly<{ states: DecodedStates; transitions: Uint8Array | null }>;

/** Why a snapshot was not used: the label of converge_snapshot_rejected_total. */
export type SnapshotRejection =
  'unreadable' | 'format' | 'truncated' | 'checksum' | 'schema' | 'fold-version' | 'other-store' | 'inconsistent' | 'cross-check';

export const snapshotRejected = (reason: SnapshotRejection, message: string, cause?: unknown): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', message, { details: { reason }, ...(cause === undefined ? {} : { cause }) });

export const rejectionOf = (err: unknown): SnapshotRejection =>
  err instanceof ConvergeError && typeof err.details?.['reason'] === 'string' ? (err.details['reason'] as SnapshotRejection) : 'unreadable';

const newline = 0x0a;
const trailerPattern = /^\{"sha256":"([0-9a-f]{64})"\}$/;

// The header is the same in formats 4, 5 and 6 but for the format number.
const headerSchema = headerSchema4.extend({ format: z.union([z.literal(5), z.literal(snapshotFormat)]) });
/** The sections a header of `format` names. */
const sectionsOf = (format: number): readonly string[] => (format >= 6 ? [...sectionNames, transitionsPart] : sectionNames);
type Header = z.infer<typeof headerSchema>;

const formatOf = (v: unknown): string => (typeof v === 'number' ? String(v) : (JSON.stringify(v) ?? String(v)));
const notReadable = (format: unknown): ConvergeError =>
  snapshotRejected(
    'format',
    `snapshot is format ${formatOf(format)}; this engine reads format ${snapshotFormat} (and ${readable.filter((f) => f !== snapshotFormat).join(', ')})`,
  );

/** Parse and check a snapshot file's bytes: header, checksum, every column and table; then build every state. */
export function parseSnapshot(bytes: Buffer): Snapshot {
  const snap = decodeSnapshot(bytes);
  return { ...snap, states: builtStates(snap.states) };
}

/** Parse and check a snapshot file's bytes: header, checksum, every column and table; the states are built when asked. */
export function decodeSnapshot(bytes: Buffer): StoredSnapshot {
  const firstEnd = bytes.indexOf(newline);
  if (firstEnd < 0) {
    // A format-3 snapshot is one JSON object on one line: say which format it is, not "truncated".
    // A file of a format this engine reads that has no newline was cut inside its header line.
    const old = /^\{"format":(\d+)/.exec(bytes.subarray(0, 32).toString('latin1'));
    if (old !== null && !readable.includes(Number(old[1]))) throw notReadable(Number(old[1]));
    throw snapshotRejected('truncated', `snapshot has no header line (${bytes.length} bytes: cut short)`);
  }
  let raw: { format?: unknown };
  try {
    raw = JSON.parse(bytes.subarray(0, firstEnd).toString('utf8')) as { format?: unknown };
  } catch (e) {
    throw snapshotRejected('schema', `snapshot header is not valid: ${(e as Error).message}`, e);
  }
  if (typeof raw !== 'object' || raw === null || !Number.isSafeInteger(raw.format))
    // No format number at all: a damaged file (warn), not one an older or newer engine wrote (info).
    throw snapshotRejected('schema', `snapshot header has no format number (format: ${formatOf(raw?.format)})`);
  if (!readable.includes(raw.format as number)) throw notReadable(raw.format);
  const h = (raw.format === 4 ? headerSchema4 : headerSchema).safeParse(raw);
  if (!h.success) throw snapshotRejected('schema', `snapshot header is not valid: ${h.error.issues[0]?.message ?? 'invalid'}`, h.error);
  const header = h.data;
  const sections = sectionsOf(header.format);
  if (header.sections.join(',') !== sections.join(','))
    throw snapshotRejected('schema', `snapshot sections are ${header.sections.join(',')}, not ${sections.join(',')}`);
  // The trailer: the last line, after the last newline but one.
  if (bytes.length === 0 || bytes[bytes.length - 1] !== newline)
    throw snapshotRejected('truncated', 'snapshot does not end with its checksum line');
  const trailerStart = bytes.lastIndexOf(newline, bytes.length - 2) + 1;
  const trailer = trailerPattern.exec(bytes.subarray(trailerStart, bytes.length - 1).toString('latin1'));
  if (trailer === null || trailerStart <= firstEnd) throw snapshotRejected('truncated', 'snapshot does not end with its checksum line');
  const actual = createHash('sha256').update(bytes.subarray(0, trailerStart)).digest('hex');
  if (actual !== trailer[1])
    throw snapshotRejected('checksum', `snapshot content does not match its sha256 (recorded ${trailer[1]}, content ${actual})`);

  let states: DecodedStates;
  let transitions: Uint8Array | null;
  try {
    const { columns, tables, ...rest } =
      header.format === 4
        ? { ...readJsonLinesV4(bytes, firstEnd + 1, trailerStart), transitions: null }
        : readBinaryPartsV5(bytes, firstEnd + 1, trailerStart - 1, header.nodes, header.format >= 6);
    states = decodeStates(header.nodes, columns, tables);
    transitions = rest.transitions;
  } catch (e) {
    if (e instanceof MissingPartError) throw snapshotRejected('truncated', `snapshot ends before ${e.part}`, e);
    if (e instanceof SnapshotContentError) throw snapshotRejected('schema', `snapshot ${e.message}`, e);
    throw e;
  }
  return {
    format: header.format,
    foldVersion: header.foldVersion,
    position: BigInt(header.position),
    eventId: header.eventId,
    writtenAt: header.writtenAt,
    states,
    transitions,
  };
}

/** Read a snapshot file, every state built; null if there is none. Throws CONVERGE_ERR_SNAPSHOT_INVALID (details.reason) if it is not usable. */
export async function readSnapshot(path: string): Promise<Snapshot | null> {
  const snap = await openSnapshot(path);
  if (snap === null) return null;
  const { path: _, ...rest } = snap;
  return { ...rest, states: builtStates(snap.states) };
}

/** Every state of a snapshot read in place, built. */
export const builtStates = (d: DecodedStates): NodeState[] => Array.from({ length: d.length }, (_, i) => d.state(i));

/**
 * Read a snapshot file, its states read in place (the runner's restore), and the path it was read
 * from; null if there is none. With `formerPath` (where an older engine kept it: Config.snapshotFormerPath),
 * that file is read when `path` does not exist. Throws as readSnapshot does.
 */
export async function openSnapshot(path: string, formerPath?: string | null): Promise<(StoredSnapshot & { path: string }) | null> {
  const snap = await openOne(path);
  if (snap !== null || formerPath === undefined || formerPath === null) return snap;
  return openOne(formerPath);
}

async function openOne(path: string): Promise<(StoredSnapshot & { path: string }) | null> {
  let bytes: Buffer;
  try {
    bytes = await readWhole(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw snapshotRejected('unreadable', `cannot read snapshot ${path}: ${(e as Error).message}`, e);
  }
  try {
    return { ...decodeSnapshot(bytes), path };
  } catch (e) {
    if (e instanceof ConvergeError) throw snapshotRejected(rejectionOf(e), `snapshot ${path}: ${e.message}`, e);
    throw snapshotRejected('schema', `snapshot ${path} is not valid: ${(e as Error).message}`, e);
  }
}

/**
 * A file's bytes in one read where the kernel allows it: readFile reads in chunks of 512 KiB, a
 * round trip to the thread pool each, and that grew a warm start's CPU with the snapshot's size.
 */
async function readWhole(path: string): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const size = (await file.stat()).size;
    const bytes = Buffer.allocUnsafe(size);
    let at = 0;
    while (at < size) {
      const { bytesRead } = await file.read(bytes, at, size - at, at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    // A file cut shorter while it was read: the bytes read, which the checksum then refuses.
    return at === size ? bytes : bytes.subarray(0, at);
  } finally {
    await file.close();
  }
}

/** Nodes whose values are gathered per slice before the writer yields to the event loop. */
const sliceNodes = 8_192;
/** Bytes gathered before one write to the file. */
const writeChunk = 1024 * 1024;

/**
 * Write a snapshot atomically, off the hot path: the states are immutable values taken at one
 * position, so their columns are gathered and encoded a slice at a time with the event loop free
 * in between (folding and the API go on), streamed to a temp file, hashed as they go, and renamed
 * into place. Once `signal` aborts it stops at the next slice, removes the temp file and rejects
 * with the signal's reason: the snapshot in place is left as it was.
 */
export async function writeSnapshot(path: string, snap: Snapshot, signal?: AbortSignal): Promise<{ bytes: number }> {
  const states = snap.states;
  if (snap.transitions != null && snap.transitions.length !== states.length)
    throw new Error(`a snapshot of ${states.length} states with ${snap.transitions.length} transitions`);
  const tmp = `${path}.${process.pid}.tmp`;
  const file = await open(tmp, 'w');
  const next = async (): Promise<void> => {
    signal?.throwIfAborted();
    await yieldToLoop();
  };
  const hash = createHash('sha256');
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let written = 0;
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    const buf = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    pending = [];
    pendingBytes = 0;
    hash.update(buf);
    written += buf.length;
    await file.write(buf);
  };
  const put = async (b: Buffer): Promise<void> => {
    pending.push(b);
    pendingBytes += b.length;
    if (pendingBytes >= writeChunk) await flush();
  };
  const putPart = async (p: Part): Promise<void> => {
    const descriptor = Buffer.from(JSON.stringify([p.name, p.kind, p.bytes.length]), 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32LE(descriptor.length);
    await put(length);
    await put(descriptor);
    const at = written + pendingBytes;
    const pad = (8 - (at % 8)) % 8;
    if (pad > 0) await put(Buffer.alloc(pad));
    // A large part (a column of latencies) goes to the hash and the file a chunk at a time.
    for (let from = 0; from < p.bytes.length; from += writeChunk) await put(p.bytes.subarray(from, from + writeChunk));
  };
  try {
    const header: Header = {
      format: snapshotFormat,
      foldVersion: snap.foldVersion,
      position: snap.position.toString(),
      eventId: snap.eventId,
      writtenAt: snap.writtenAt,
      nodes: states.length,
      sections: [...sectionsOf(snapshotFormat)],
    };
    await put(Buffer.from(`${JSON.stringify(header)}\n`, 'utf8'));
    const encoder = createEncoder(states, snap.position);
    for (const name of columnNames) {
      // Gathered in place: concatenating slice after slice copied each column ~n/slice times.
      const values = new Array<unknown>(states.length);
      for (let from = 0; from < states.length; from += sliceNodes) {
        const slice = encoder.values(name, from, Math.min(states.length, from + sliceNodes));
        for (let i = 0; i < slice.length; i++) values[from + i] = slice[i];
        await next();
      }
      // Encoded a slice at a time too: encodeColumn over the whole column would hold the loop for all of it.
      for (const p of await encodeColumnSliced(name, values, sliceNodes, next)) await putPart(p);
      await next();
    }
    for (const name of tableNames) await putPart(encodeTable(name, encoder.table(name)));
    await putPart(encodeTransitions(snap.transitions ?? new Uint8Array(states.length)));
    await put(Buffer.from('\n'));
    await flush();
    const trailer = Buffer.from(`{"sha256":"${hash.digest('hex')}"}\n`);
    await file.write(trailer);
    written += trailer.length;
    await file.close();
    signal?.throwIfAborted();
  } catch (e) {
    await file.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw e;
  }
  await rename(tmp, path);
  return { bytes: written };
}
