import { eventLeafHash } from '../../core/audit/leaf.ts';
import { createTreeBuilder } from '../../core/audit/merkle.ts';
import type { CompactRange, Hash, TreeBuilder } from '../../core/audit/merkle.ts';

// What every adapter shares to keep the audit tree (docs/audit.md) beside its rows: the leaf hash
// of an event from the text the adapter stores, and the frontier (the tree's compact range) as
// the bytes a row holds, so an append resumes the tree without reading the log.

const utf8 = (text: string): Buffer => Buffer.from(text, 'utf8');

/** The leaf hash of an event as an adapter stores it: data and metadata as the exact JSON text it writes. */
export const storedLeafHash = (position: bigint, stream: string, revision: bigint, type: string, data: string, metadata: string): Hash =>
  eventLeafHash({ position, stream, revision, type, data: utf8(data), metadata: utf8(metadata) });

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
