import { LEAF_FORMAT_VERSION, eventLeafHash } from '../../core/audit/leaf.ts';
import { createTreeBuilder, sha256 } from '../../core/audit/merkle.ts';
import type { CompactRange, Hash, TreeBuilder } from '../../core/audit/merkle.ts';

// What every adapter shares to keep the audit tree (docs/audit.md) beside its rows: the leaf hash
// of an event from the text the adapter stores, and the frontier (the tree's compact range) as
// the bytes a row holds, so an append resumes the tree without reading the log.

const utf8 = (text: string): Buffer => Buffer.from(text, 'utf8');

/**
 * The leaf hash of an event as an adapter stores it: data and metadata as the exact JSON text it
 * writes. Every append runs it for every event, so it writes the leaf's bytes (leaf.ts's layout)
 * straight from the strings into one buffer, instead of encoding each string first; a string
 * that leafBytes would refuse (a lone surrogate) takes leaf.ts's own path, which refuses it.
 */
export function storedLeafHash(position: bigint, stream: string, revision: bigint, type: string, data: string, metadata: string): Hash {
  if (surrogate.test(stream) || surrogate.test(type) || position < 0n || revision < 0n || position > u64Max || revision > u64Max) {
    return eventLeafHash({ position, stream, revision, type, data: utf8(data), metadata: utf8(metadata) });
  }
  const s = Buffer.byteLength(stream, 'utf8');
  const t = Buffer.byteLength(type, 'utf8');
  const d = Buffer.byteLength(data, 'utf8');
  const m = Buffer.byteLength(metadata, 'utf8');
  const out = Buffer.allocUnsafe(1 + 1 + 8 + 4 + s + 8 + 4 + t + 4 + d + 4 + m);
  let at = out.writeUInt8(0, 0); // the leaf prefix of RFC 9162, so the buffer is hashed whole
  at = out.writeUInt8(LEAF_FORMAT_VERSION, at);
  at = out.writeBigUInt64BE(position, at);
  at = out.writeUInt32BE(s, at);
  at += out.write(stream, at, 'utf8');
  at = out.writeBigUInt64BE(revision, at);
  at = out.writeUInt32BE(t, at);
  at += out.write(type, at, 'utf8');
  at = out.writeUInt32BE(d, at);
  at += out.write(data, at, 'utf8');
  at = out.writeUInt32BE(m, at);
  out.write(metadata, at, 'utf8');
  return sha256(out);
}

const surrogate = /[\ud800-\udfff]/;
const u64Max = 2n ** 64n - 1n;

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
