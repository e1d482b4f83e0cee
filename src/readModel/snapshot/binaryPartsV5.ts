import { z } from 'zod';
import { columnNames, SnapshotContentError, tableNames } from './columns.ts';
import type { Columns, Tables } from './columns.ts';
import { partKinds } from './columnParts.ts';
import type { Part } from './columnParts.ts';
import { decodeColumn, decodeTable, MissingPartError } from './decodeColumn.ts';
import { decodeTransitions, transitionsPart } from './transitions.ts';

// Format 5's body: framed binary parts, each a little-endian uint32 length, a JSON descriptor
// ["name", "kind", bytes], zero padding to a multiple of 8 bytes from the file's start (so typed
// arrays read the data in place), then the data. snapshotFile.ts writes them (writeSnapshot).

const newline = 0x0a;
const descriptorSchema = z.tuple([z.string().min(1).max(200), z.enum(partKinds), z.number().int().min(0)]);

/**
 * Formats 5 and 6: the parts between the header line and the trailer's newline, decoded and
 * checked; format 6 (`withTransitions`) ends with each node's latest transition (transitions.ts).
 */
export function readBinaryPartsV5(
  bytes: Buffer,
  from: number,
  to: number,
  nodes: number,
  withTransitions = false,
): { columns: Columns; tables: Tables; transitions: Uint8Array | null } {
  const parts = new Map<string, Part>();
  let at = from;
  while (at < to) {
    if (at + 4 > to) throw new MissingPartError('a part header');
    const length = bytes.readUInt32LE(at);
    at += 4;
    if (at + length > to) throw new MissingPartError('a part descriptor');
    let descriptor: z.infer<typeof descriptorSchema>;
    try {
      descriptor = descriptorSchema.parse(JSON.parse(bytes.subarray(at, at + length).toString('utf8')));
    } catch (e) {
      throw new SnapshotContentError(`part descriptor at byte ${at} is not valid: ${(e as Error).message}`);
    }
    at += length;
    at += (8 - ((bytes.byteOffset + at) % 8)) % 8;
    const [name, kind, size] = descriptor;
    if (at + size > to) throw new MissingPartError(name);
    if (parts.has(name)) throw new SnapshotContentError(`part ${name} appears twice`);
    parts.set(name, { name, kind, bytes: bytes.subarray(at, at + size) });
    at += size;
  }
  if (bytes[to] !== newline) throw new MissingPartError('the trailer');
  const reader = {
    take(name: string): Part | undefined {
      const p = parts.get(name);
      parts.delete(name);
      return p;
    },
  };
  const columns = {} as Record<string, ArrayLike<unknown>>;
  for (const name of columnNames) columns[name] = decodeColumn(name, reader, nodes);
  const tables = {} as Record<string, unknown>;
  for (const name of tableNames) tables[name] = decodeTable(name, reader);
  let transitions: Uint8Array | null = null;
  if (withTransitions) {
    const p = reader.take(transitionsPart);
    if (p === undefined) throw new MissingPartError(transitionsPart);
    transitions = decodeTransitions(p, nodes);
  }
  if (parts.size > 0) throw new SnapshotContentError(`parts the format does not name: ${[...parts.keys()].join(', ')}`);
  return { columns: columns as Columns, tables: tables as Tables, transitions };
}
