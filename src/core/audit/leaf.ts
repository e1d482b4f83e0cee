import { sha256 } from './merkle.ts';
import type { Hash } from './merkle.ts';

// The canonical bytes of one stored event as a leaf of the audit tree (docs/audit.md#the-leaf).
// Each field is there so that a change to it changes the leaf, and so the tree's root:
// - position: the event's place in the global order. The tree is built in position order, so a
//   deleted, inserted or reordered event moves every later leaf; the position itself also pins
//   gaps the store's numbering may have, which the leaf index alone would not.
// - stream and revision: which stream the event belongs to and where in it, so an event moved
//   to another node's stream (or renumbered in its own) is a different leaf.
// - type: what the event claims to be, kept apart from the data that a reader decodes by it.
// - data: exactly the bytes the store holds, not a re-encoding of the decoded event, so that two
//   encoders of the same value cannot disagree and nothing stored escapes the hash.
// - metadata: exactly as stored too. It carries the shape version (`v`) that picks the upcaster,
//   so a changed metadata changes what a replay reads out of the same data bytes.
// Fixed-width fields are written at their width; each variable one carries its length before it,
// so no two different events can give the same bytes. The first byte is the format's version
// (1 had no metadata and was never stored by any adapter).

export const LEAF_FORMAT_VERSION = 2;

export type LeafFields = Readonly<{
  position: bigint;
  stream: string;
  revision: bigint;
  type: string;
  /** The event's data exactly as stored. */
  data: Uint8Array;
  /** The event's metadata exactly as stored. */
  metadata: Uint8Array;
}>;

const U64_MAX = 2n ** 64n - 1n;
const U32_MAX = 2 ** 32 - 1;

function checkU64(value: bigint, name: string): void {
  if (value < 0n || value > U64_MAX) throw new RangeError(`${name} ${value} does not fit an unsigned 64-bit integer`);
}

// A lone surrogate would be written as U+FFFD, so two different strings would share their bytes.
// The plain range test first: it is cheap, and almost no string holds a surrogate at all.
function checkText(text: string, name: string): number {
  if (/[\ud800-\udfff]/.test(text) && /\p{Cs}/u.test(text))
    throw new RangeError(`${name} holds a lone surrogate, which UTF-8 cannot write`);
  return Buffer.byteLength(text, 'utf8');
}

function checkLength(length: number, name: string): number {
  if (length > U32_MAX) throw new RangeError(`${name} is ${length} bytes, more than a 32-bit length can say`);
  return length;
}

/**
 * version (1 byte) || position (u64 BE) || stream (u32 BE length, UTF-8) || revision (u64 BE) ||
 * type (u32 BE length, UTF-8) || data (u32 BE length, bytes) || metadata (u32 BE length, bytes).
 * Written into one buffer sized up front: an adapter runs it for every event it appends.
 */
export const leafBytes = (event: LeafFields): Buffer => encodeLeaf(event, 0, null);

// eventLeafHash's buffer, reused: the bytes are hashed and dropped at once (hashing is synchronous),
// and a fresh buffer per event was a good part of what verify's walk left to the collector.
let scratch = Buffer.allocUnsafe(4096);

/** The leaf's bytes after `skip` bytes left for the caller (the hash's 0x00 prefix), in `into` when it is given and large enough. */
function encodeLeaf(event: LeafFields, skip: number, into: Buffer | null): Buffer {
  checkU64(event.position, 'position');
  checkU64(event.revision, 'revision');
  const streamLength = checkLength(checkText(event.stream, 'stream'), 'stream');
  const typeLength = checkLength(checkText(event.type, 'type'), 'type');
  const dataLength = checkLength(event.data.length, 'data');
  const metadataLength = checkLength(event.metadata.length, 'metadata');
  const size = skip + 1 + 8 + 4 + streamLength + 8 + 4 + typeLength + 4 + dataLength + 4 + metadataLength;
  const out = into !== null && into.length >= size ? into.subarray(0, size) : Buffer.allocUnsafe(size);
  let at = out.writeUInt8(LEAF_FORMAT_VERSION, skip);
  at = out.writeBigUInt64BE(event.position, at);
  at = out.writeUInt32BE(streamLength, at);
  at += out.write(event.stream, at, 'utf8');
  at = out.writeBigUInt64BE(event.revision, at);
  at = out.writeUInt32BE(typeLength, at);
  at += out.write(event.type, at, 'utf8');
  at = out.writeUInt32BE(dataLength, at);
  out.set(event.data, at);
  at += dataLength;
  at = out.writeUInt32BE(metadataLength, at);
  out.set(event.metadata, at);
  return out;
}

/** The leaf's hash in the audit tree: SHA-256(0x00 || leafBytes), encoded straight after its prefix and hashed in one call. */
export function eventLeafHash(event: LeafFields): Hash {
  const prefixed = encodeLeaf(event, 1, scratch);
  if (prefixed.length > scratch.length && prefixed.length <= 1 << 20) scratch = Buffer.allocUnsafe(prefixed.length * 2);
  prefixed[0] = 0x00;
  return sha256(prefixed);
}
