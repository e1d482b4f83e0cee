import { sha256, sha256Into } from './merkle.ts';
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

// The prefixed leaf (0x00 || leafBytes) of every event hashed is written into this one buffer,
// hashed and forgotten: hashing is synchronous. Appends and verify's walk run it for every event
// (docs/audit.md#what-the-tree-costs-an-append), so its fast path writes lengths after the text
// (no separate count), positions as numbers, and short ASCII text a character at a time.
let scratch = Buffer.allocUnsafe(16 * 1024);
/** Leaves past this many bytes are encoded by encodeLeaf into a buffer of their own. */
const maxScratch = 1 << 22;
/** views[n]: the scratch's first n bytes, made when first needed; a subarray per event cost a tenth of a leaf. */
const views: (Buffer | undefined)[] = new Array<Buffer | undefined>(2048);

/**
 * The scratch, at least `bound` bytes long, for the prefixed leaf's bytes; null when `bound` is past
 * what it keeps (the caller takes encodeLeaf's path). Valid until the next call.
 */
export function leafScratch(bound: number): Buffer | null {
  if (bound > maxScratch) return null;
  if (bound > scratch.length) {
    scratch = Buffer.allocUnsafe(Math.min(maxScratch, bound * 2));
    views.fill(undefined);
  }
  return scratch;
}

/** The scratch's first `length` bytes. */
export const leafScratchView = (length: number): Buffer =>
  length < views.length ? (views[length] ??= scratch.subarray(0, length)) : scratch.subarray(0, length);

/**
 * An integer from 0 to 2^32 - 1 as a big-endian u32 at `at`, a byte at a time: Buffer#writeUInt32BE
 * checks its arguments on every call, and a leaf writes six of these (docs/audit.md#what-the-tree-costs-an-append).
 */
export function writeU32(out: Uint8Array, value: number, at: number): void {
  out[at] = value >>> 24;
  out[at + 1] = value >>> 16;
  out[at + 2] = value >>> 8;
  out[at + 3] = value;
}

/** An integer below 2^53 as an unsigned 64-bit big-endian number at `at`. */
export function writeU64(out: Uint8Array, value: number, at: number): void {
  writeU32(out, Math.floor(value / 0x1_0000_0000), at);
  writeU32(out, value >>> 0, at + 4);
}

/**
 * `text` as UTF-8 at `at`; returns the bytes written. Short ASCII text (streams, types, metadata) is
 * copied a character at a time, cheaper than a call into C++; an event's data, a few dozen characters
 * and more, is cheaper through Buffer#write (docs/audit.md#what-the-tree-costs-an-append). More bytes
 * than characters means some were not ASCII: the only text that may hold a surrogate.
 */
export function writeText(out: Buffer, text: string, at: number): number {
  const n = text.length;
  if (n > shortText) return out.write(text, at, 'utf8');
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) return out.write(text, at, 'utf8');
    out[at + i] = c;
  }
  return n;
}

/** Text longer than this is written by Buffer#write, shorter a character at a time. */
const shortText = 24;

export const surrogate = /[\ud800-\udfff]/;

/** Both are integers from 0 to 2^53 - 1: the positions the fast paths write as numbers. */
export const bothSafe = (p: number, r: number): boolean => p >= 0 && p <= Number.MAX_SAFE_INTEGER && r >= 0 && r <= Number.MAX_SAFE_INTEGER;

/** 0x00 || leafBytes(event), in the scratch when it can be; encodeLeaf (which refuses what it must) otherwise. */
function prefixedLeaf(event: LeafFields): Buffer {
  const { stream, type, data, metadata } = event;
  const p = Number(event.position);
  const r = Number(event.revision);
  const out = bothSafe(p, r) ? leafScratch(38 + 3 * (stream.length + type.length) + data.length + metadata.length) : null;
  if (out === null) return slowPrefixedLeaf(event);
  out[0] = 0x00;
  out[1] = LEAF_FORMAT_VERSION;
  writeU64(out, p, 2);
  const s = writeText(out, stream, 14);
  writeU32(out, s, 10);
  let at = 14 + s;
  writeU64(out, r, at);
  const t = writeText(out, type, at + 12);
  writeU32(out, t, at + 8);
  at += 12 + t;
  writeU32(out, data.length, at);
  out.set(data, at + 4);
  at += 4 + data.length;
  writeU32(out, metadata.length, at);
  out.set(metadata, at + 4);
  at += 4 + metadata.length;
  if ((s !== stream.length && surrogate.test(stream)) || (t !== type.length && surrogate.test(type))) return slowPrefixedLeaf(event);
  return leafScratchView(at);
}

function slowPrefixedLeaf(event: LeafFields): Buffer {
  const prefixed = encodeLeaf(event, 1, null);
  prefixed[0] = 0x00;
  return prefixed;
}

/** The leaf's hash in the audit tree: SHA-256(0x00 || leafBytes), encoded straight after its prefix and hashed in one call. */
export const eventLeafHash = (event: LeafFields): Hash => sha256(prefixedLeaf(event));

/** eventLeafHash written into `out` at `at`, for a caller that keeps the hashes side by side. */
export const eventLeafHashInto = (event: LeafFields, out: Uint8Array, at: number): void => sha256Into(prefixedLeaf(event), out, at);
