import { SnapshotContentError } from './columns.ts';
import type { Part } from './columnParts.ts';

// Format 6's last part: each node's latest recorded liveness transition (docs/design.md §3
// "Liveness as recorded"), one byte per node in the states' order. It is not a field of the node
// state (the fold's answer does not change, so foldVersion does not either); the read model keeps
// it beside the states, and the current view of an engine without ingest judges a node by it.
// Formats 4 and 5 have none: restored from them, a node is judged by grace until its next one.

export type Transition = 'heard' | 'silent' | null;

export const transitionsPart = 'transitions';
const NONE = 0;
const HEARD = 1;
const SILENT = 2;

export const transitionCode = (t: Transition): number => (t === 'heard' ? HEARD : t === 'silent' ? SILENT : NONE);
export const transitionOfCode = (code: number | undefined): Transition => (code === HEARD ? 'heard' : code === SILENT ? 'silent' : null);

/** The part of `codes` (transitionCode per node). */
export const encodeTransitions = (codes: Uint8Array): Part => ({
  name: transitionsPart,
  kind: 'i8',
  bytes: Buffer.from(codes.buffer, codes.byteOffset, codes.length),
});

/** The codes of a `transitions` part, one per node, each checked. */
export function decodeTransitions(p: Part, nodes: number): Uint8Array {
  if (p.kind !== 'i8') throw new SnapshotContentError(`${transitionsPart}: a ${p.kind} part, not i8`);
  if (p.bytes.length !== nodes) throw new SnapshotContentError(`${transitionsPart}: ${p.bytes.length} values for ${nodes} nodes`);
  const codes = new Uint8Array(p.bytes.buffer, p.bytes.byteOffset, p.bytes.length);
  for (let i = 0; i < codes.length; i++)
    if (codes[i]! > SILENT) throw new SnapshotContentError(`${transitionsPart}[${i}]: expected 0, 1 or 2, got ${codes[i]}`);
  return codes;
}
