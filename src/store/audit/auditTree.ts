import {
  LEAF_FORMAT_VERSION,
  bothSafe,
  eventLeafHash,
  eventLeafHashInto,
  leafScratch,
  leafScratchView,
  surrogate,
  writeText,
  writeU32,
  writeU64,
} from '../../core/audit/leaf.ts';
import { createTreeBuilder, sha256, sha256Into } from '../../core/audit/merkle.ts';
import type { Hash, TreeBuilder } from '../../core/audit/merkle.ts';

// What every adapter shares to keep the audit tree (docs/audit.md) beside its rows: the leaf hash
// of an event from the text the adapter stores, and the frontier (the tree's compact range) as
// the bytes a row holds, so an append resumes the tree without reading the log.

const utf8 = (text: string): Buffer => Buffer.from(text, 'utf8');

/**
 * The leaf hash of an event as an adapter stores it: data and metadata as the exact JSON text it
 * writes. Every append runs it for every event (docs/audit.md#what-the-tree-costs-an-append), so it
 * writes the leaf's bytes (leaf.ts's layout, after the 0x00 prefix of RFC 9162) straight from the
 * strings into leaf.ts's scratch, each length after its text (no separate count). Anything outside
 * that path (a position past 2^53, a lone surrogate in stream or type, which leafBytes refuses)
 * takes leaf.ts's own, which encodes or refuses it. With `into`, the hash is written there.
 */
export function storedLeafHash(
  position: bigint,
  stream: string,
  revision: bigint,
  type: string,
  data: string,
  metadata: string,
  into?: Buffer,
): Hash {
  const p = Number(position);
  const r = Number(revision);
  const out = bothSafe(p, r) ? leafScratch(38 + 3 * (stream.length + type.length + data.length + metadata.length)) : null;
  if (out === null) return slowLeafHash(position, stream, revision, type, data, metadata, into);
  out[0] = 0x00; // the leaf prefix of RFC 9162, so the buffer is hashed whole
  out[1] = LEAF_FORMAT_VERSION;
  writeU64(out, p, 2);
  const s = writeText(out, stream, 14);
  writeU32(out, s, 10);
  let at = 14 + s;
  writeU64(out, r, at);
  const t = writeText(out, type, at + 12);
  writeU32(out, t, at + 8);
  at += 12 + t;
  const d = writeText(out, data, at + 4);
  writeU32(out, d, at);
  at += 4 + d;
  const m = writeText(out, metadata, at + 4);
  writeU32(out, m, at);
  at += 4 + m;
  if ((s !== stream.length && surrogate.test(stream)) || (t !== type.length && surrogate.test(type))) {
    return slowLeafHash(position, stream, revision, type, data, metadata, into);
  }
  if (into === undefined) return sha256(leafScratchView(at));
  sha256Into(leafScratchView(at), into);
  return into;
}

function slowLeafHash(
  position: bigint,
  stream: string,
  revision: bigint,
  type: string,
  data: string,
  metadata: string,
  into?: Buffer,
): Hash {
  const event = { position, stream, revision, type, data: utf8(data), metadata: utf8(metadata) };
  if (into === undefined) return eventLeafHash(event);
  eventLeafHashInto(event, into, 0);
  return into;
}

/** A tree builder resumed from a stored size and frontier; throws if they do not fit each other. */
export function resumeTree(size: number, frontier: Uint8Array | null): TreeBuilder {
  const bytes = Buffer.from(frontier ?? new Uint8Array(0));
  if (bytes.length % 32 !== 0) throw new RangeError(`a stored audit frontier is ${bytes.length} bytes, not a multiple of 32`);
  const hashes: Hash[] = [];
  for (let at = 0; at < bytes.length; at += 32) hashes.push(bytes.subarray(at, at + 32));
  return createTreeBuilder({ size, hashes });
}

export { createTreeBuilder };
