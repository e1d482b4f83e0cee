import { createHash } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { foldVersion } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';
import { ConvergeError } from '../errors.ts';
import {
  columnNames,
  createEncoder,
  decodeStates,
  headerSchema,
  sectionNames,
  sectionSchemas,
  SnapshotContentError,
  tableNames,
} from './snapshotFormat.ts';
import type { Header, Sections } from './snapshotFormat.ts';

// Read-model snapshots: the folded states at one position. A snapshot is only a shortcut: it is
// restored only if it was made by a fold of the same version (projections/foldVersion.ts), from
// this store (the event at its position has the same id), and passes the checks of
// snapshotTrust.ts. Anything else is discarded and the runner folds from zero — slower, never wrong.
//
// The file, in UTF-8 lines:
//   1. a header, JSON: format, foldVersion, position, eventId, writtenAt, nodes, sections;
//   2. one JSON array per section (snapshotFormat.ts): the columns, then the tables;
//   3. a trailer, {"sha256": "<hex>"}: the sha256 of every byte before it.
// The checksum catches a torn, truncated or edited file; it is not a signature (whoever can write
// the file can reseal it), which is why the runner also checks sampled nodes against the store.
// Written to a temp file and renamed, so a crash leaves the old snapshot or the new one.

// 2: object keys starting with `$` are escaped; a format-1 file is discarded.
// 3: foldVersion is the number in projections/foldVersion.ts, no longer a hash of the fold's source.
// 4: columns and shared tables in lines with a sha256 trailer (issue 10, issue 13 item 3); every
//    section checked by a zod schema. A format-3 file (one JSON object) is discarded with a log line.
export const snapshotFormat = 4;
export { foldVersion };

export type Snapshot = Readonly<{
  format: number;
  foldVersion: number;
  position: bigint;
  /** Id of the event at `position`: ties the snapshot to the store it was made from. */
  eventId: string;
  writtenAt: string;
  states: readonly NodeState[];
}>;

/** Why a snapshot was not used: the label of converge_snapshot_rejected_total. */
export type SnapshotRejection =
  'unreadable' | 'format' | 'truncated' | 'checksum' | 'schema' | 'fold-version' | 'other-store' | 'inconsistent' | 'cross-check';

export const snapshotRejected = (reason: SnapshotRejection, message: string, cause?: unknown): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_SNAPSHOT_INVALID', message, { details: { reason }, ...(cause === undefined ? {} : { cause }) });

export const rejectionOf = (err: unknown): SnapshotRejection =>
  err instanceof ConvergeError && typeof err.details?.['reason'] === 'string' ? (err.details['reason'] as SnapshotRejection) : 'unreadable';

const newline = 0x0a;
const trailerPattern = /^\{"sha256":"([0-9a-f]{64})"\}$/;

/** Parse and check a snapshot file's bytes: header, checksum, every section's schema; then build the states. */
export function parseSnapshot(bytes: Buffer): Snapshot {
  const firstEnd = bytes.indexOf(newline);
  if (firstEnd < 0) {
    // A format-3 snapshot is one JSON object on one line: say which format it is, not "truncated".
    const old = /^\{"format":(\d+)/.exec(bytes.subarray(0, 32).toString('latin1'));
    if (old !== null) throw snapshotRejected('format', `snapshot is format ${old[1]}; this engine reads format ${snapshotFormat}`);
    throw snapshotRejected('truncated', 'snapshot has no header line');
  }
  let header: Header;
  try {
    const raw = JSON.parse(bytes.subarray(0, firstEnd).toString('utf8')) as { format?: unknown };
    if (raw.format !== snapshotFormat)
      throw snapshotRejected('format', `snapshot is format ${String(raw.format)}; this engine reads format ${snapshotFormat}`);
    header = headerSchema.parse(raw);
  } catch (e) {
    if (e instanceof ConvergeError) throw e;
    throw snapshotRejected('schema', `snapshot header is not valid: ${(e as Error).message}`, e);
  }
  if (header.sections.join(',') !== sectionNames.join(','))
    throw snapshotRejected('schema', `snapshot sections are ${header.sections.join(',')}, not ${sectionNames.join(',')}`);
  // The trailer: the last line, after the last newline but one.
  if (bytes.length === 0 || bytes[bytes.length - 1] !== newline)
    throw snapshotRejected('truncated', 'snapshot does not end with its checksum line');
  const trailerStart = bytes.lastIndexOf(newline, bytes.length - 2) + 1;
  const trailer = trailerPattern.exec(bytes.subarray(trailerStart, bytes.length - 1).toString('latin1'));
  if (trailer === null) throw snapshotRejected('truncated', 'snapshot does not end with its checksum line');
  const actual = createHash('sha256').update(bytes.subarray(0, trailerStart)).digest('hex');
  if (actual !== trailer[1])
    throw snapshotRejected('checksum', `snapshot content does not match its sha256 (recorded ${trailer[1]}, content ${actual})`);

  const sections: Partial<Record<string, unknown>> = {};
  let at = firstEnd + 1;
  for (const name of sectionNames) {
    const end = bytes.indexOf(newline, at);
    if (end < 0 || end >= trailerStart) throw snapshotRejected('truncated', `snapshot ends before section ${name}`);
    let value: unknown;
    try {
      value = JSON.parse(bytes.subarray(at, end).toString('utf8'));
    } catch (e) {
      throw snapshotRejected('schema', `snapshot section ${name} is not JSON: ${(e as Error).message}`, e);
    }
    const r = sectionSchemas[name].safeParse(value);
    if (!r.success) {
      const issue = r.error.issues[0];
      const where = issue === undefined ? '' : `[${issue.path.join('][')}]`;
      throw snapshotRejected('schema', `snapshot ${name}${where}: ${issue?.message ?? 'invalid'}`, r.error);
    }
    sections[name] = r.data;
    at = end + 1;
  }
  if (at !== trailerStart) throw snapshotRejected('schema', 'snapshot has more sections than its header names');
  let states: NodeState[];
  try {
    states = decodeStates(header, sections as Sections);
  } catch (e) {
    if (e instanceof SnapshotContentError) throw snapshotRejected('schema', `snapshot: ${e.message}`, e);
    throw e;
  }
  return {
    format: header.format,
    foldVersion: header.foldVersion,
    position: BigInt(header.position),
    eventId: header.eventId,
    writtenAt: header.writtenAt,
    states,
  };
}

/** Read a snapshot file; null if there is none. Throws CONVERGE_ERR_SNAPSHOT_INVALID (details.reason) if it is not usable. */
export async function readSnapshot(path: string): Promise<Snapshot | null> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw snapshotRejected('unreadable', `cannot read snapshot ${path}: ${(e as Error).message}`, e);
  }
  try {
    return parseSnapshot(bytes);
  } catch (e) {
    if (e instanceof ConvergeError) throw snapshotRejected(rejectionOf(e), `snapshot ${path}: ${e.message}`, e);
    throw snapshotRejected('schema', `snapshot ${path} is not valid: ${(e as Error).message}`, e);
  }
}

/** Nodes encoded per slice before the writer yields to the event loop (a slice costs about a millisecond). */
const sliceNodes = 4_096;
/** Bytes gathered before one write to the file. */
const writeChunk = 256 * 1024;

/**
 * Write a snapshot atomically, off the hot path: the states are immutable values taken at one
 * position, so they are encoded a slice at a time with the event loop free in between (folding
 * and the API go on), streamed to a temp file, hashed as they go, and renamed into place.
 */
export async function writeSnapshot(path: string, snap: Snapshot): Promise<{ bytes: number }> {
  const states = snap.states;
  const tmp = `${path}.${process.pid}.tmp`;
  const file = await open(tmp, 'w');
  const hash = createHash('sha256');
  let pending: string[] = [];
  let pendingBytes = 0;
  let written = 0;
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    const buf = Buffer.from(pending.join(''), 'utf8');
    pending = [];
    pendingBytes = 0;
    hash.update(buf);
    written += buf.length;
    await file.write(buf);
  };
  const put = async (s: string): Promise<void> => {
    pending.push(s);
    pendingBytes += s.length;
    if (pendingBytes >= writeChunk) await flush();
  };
  try {
    const header: Header = {
      format: snapshotFormat,
      foldVersion: snap.foldVersion,
      position: snap.position.toString(),
      eventId: snap.eventId,
      writtenAt: snap.writtenAt,
      nodes: states.length,
      sections: [...sectionNames],
    };
    await put(`${JSON.stringify(header)}\n`);
    const encoder = createEncoder(states, snap.position);
    for (const name of columnNames) {
      await put('[');
      for (let from = 0; from < states.length; from += sliceNodes) {
        const part = encoder.column(name, from, Math.min(states.length, from + sliceNodes));
        await put(from === 0 ? part : `,${part}`);
        await yieldToLoop();
      }
      await put(']\n');
    }
    for (const name of tableNames) await put(`${encoder.table(name)}\n`);
    await flush();
    const trailer = Buffer.from(`{"sha256":"${hash.digest('hex')}"}\n`);
    await file.write(trailer);
    written += trailer.length;
    await file.close();
  } catch (e) {
    await file.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw e;
  }
  await rename(tmp, path);
  return { bytes: written };
}
