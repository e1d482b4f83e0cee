import { LEAF_FORMAT_VERSION, eventLeafHash } from '../../core/audit/leaf.ts';
import { createTreeBuilder, sha256, sha256Into } from '../../core/audit/merkle.ts';
import type { CompactRange, Hash, TreeBuilder } from '../../core/audit/merkle.ts';

// What every adapter shares to keep the audit tree (docs/audit.md) beside its rows: the leaf hash
// of an event from the text the adapter stores, and the frontier (the tree's compact range) as
// the bytes a row holds, so an append resumes the tree without reading the log.

const utf8 = (text: string): Buffer => Buffer.from(text, 'utf8');

// The leaf's bytes are written into this buffer, hashed and forgotten (hashing is synchronous), so
// one buffer serves every event; a fresh one per event was garbage for every append.
let scratch = Buffer.allocUnsafe(16 * 1024);

/**
 * The leaf hash of an event as an adapter stores it: data and metadata as the exact JSON text it
 * writes. Every append runs it for every event (docs/audit.md#what-the-tree-costs-an-append), so it
 * writes the leaf's bytes (leaf.ts's layout, after the 0x00 prefix of RFC 9162) straight from the
 * strings into one reused buffer, each length after its text is written (no separate count), and
 * positions as numbers. Anything outside that fast path (a position past 2^53, a lone surrogate in
 * stream or type, which leafBytes refuses) takes leaf.ts's own path, which encodes or refuses it.
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
  const bound = 38 + 3 * (stream.length + type.length + data.length + metadata.length);
  if (!(p >= 0 && p <= Number.MAX_SAFE_INTEGER && r >= 0 && r <= Number.MAX_SAFE_INTEGER) || bound > maxScratch) {
    return eventLeafHash({ position, stream, revision, type, data: utf8(data), metadata: utf8(metadata) });
  }
  if (bound > scratch.length) {
    scratch = Buffer.allocUnsafe(Math.min(maxScratch, bound * 2));
    views.fill(undefined);
  }
  const out = scratch;
  out[0] = 0x00; // the leaf prefix of RFC 9162, so the buffer is hashed whole
  out[1] = LEAF_FORMAT_VERSION;
  writeU64(out, p, 2);
  const s = writeText(out, stream, 14);
  out.writeUInt32BE(s, 10);
  let at = 14 + s;
  writeU64(out, r, at);
  const t = writeText(out, type, at + 12);
  out.writeUInt32BE(t, at + 8);
  at += 12 + t;
  const d = writeText(out, data, at + 4);
  out.writeUInt32BE(d, at);
  at += 4 + d;
  const m = writeText(out, metadata, at + 4);
  out.writeUInt32BE(m, at);
  at += 4 + m;
  // More bytes than characters means some were not ASCII, the only strings that may hold a surrogate.
  if ((s !== stream.length && surrogate.test(stream)) || (t !== type.length && surrogate.test(type))) {
    return eventLeafHash({ position, stream, revision, type, data: utf8(data), metadata: utf8(metadata) });
  }
  // A view of the scratch per length, kept: a subarray per event was a tenth of the leaf's cost.
  const bytes = at < views.length ? (views[at] ??= out.subarray(0, at)) : out.subarray(0, at);
  return into === undefined ? sha256(bytes) : sha256Into(bytes, into);
}

/** views[n] is the scratch's first n bytes, made when first needed; forgotten when the scratch is replaced. */
const views: (Buffer | undefined)[] = new Array<Buffer | undefined>(2048);

const surrogate = /[\ud800-\udfff]/;
/** Leaves past this many bytes are encoded by leaf.ts into a buffer of their own. */
const maxScratch = 1 << 22;

/** An integer below 2^53 as an unsigned 64-bit big-endian number at `at`. */
function writeU64(out: Buffer, value: number, at: number): void {
  out.writeUInt32BE(Math.floor(value / 0x1_0000_0000), at);
  out.writeUInt32BE(value >>> 0, at + 4);
}

/**
 * `text` as UTF-8 at `at`; returns the bytes written. Short ASCII text (every stream and type, most
 * metadata) is copied a character at a time: cheaper than a call into C++ for a few dozen bytes.
 */
function writeText(out: Buffer, text: string, at: number): number {
  const n = text.length;
  if (n > 96) return out.write(text, at, 'utf8');
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) return out.write(text, at, 'utf8');
    out[at + i] = c;
  }
  return n;
}

/** A compact range's hashes, largest subtree first, one after the other (32 bytes each). */
export const frontierBytes = (range: CompactRange): Buffer => Buffer.concat(range.hashes as Hash[]);

/** A tree builder resumed from a stored size and frontier; throws if they do not fit each other. */
export function resumeTree(size: number, frontier: Uint8Array | null): TreeBuilder {
  const bytes = Buffer.from(frontier ?? new Uint8Array(0));
  if (bytes.length % 32 !== 0) throw new RangeError(`a stored audit frontier is ${bytes.length} bytes, not a multiple of 32`);
  const hashes: Hash[] = [];
  for (let at = 0; at < bytes.length; at += 32) hashes.push(bytes.subarray(at, at + 32));
  return createTreeBuilder({ size, hashes });
}

export { createTreeBuilder };
