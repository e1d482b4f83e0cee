import { createHash } from 'node:crypto';

// The stream filter of an archive segment (docs/operations.md "Retention and archive"): which
// streams a segment may hold, so a read of one node's history skips the segments that cannot hold
// it without opening them. A bloom filter split into `filterBuckets` parts by a hash of the stream:
// a stream's bits all lie in its own bucket's part, so a read looks at 1/64 of every segment's
// filter (one row per segment in the store's manifest), not all of it. Each part is sized to the
// streams that fell into it (10 bits a stream, 7 probes): about 0.8 % of the segments that do not
// hold a stream are still opened for it; never is a segment that holds it skipped.

/** The parts a segment's filter is split into; a stream's part is `bucketOf(stream)`. */
export const filterBuckets = 64;
/** The first byte of each part: the filter's version (this layout, these constants). */
export const filterVersion = 1;
const bitsPerStream = 10;
const probes = 7;

type Hashed = Readonly<{ bucket: number; h1: number; h2: number }>;

/** One sha256 a stream: the bucket from its first 4 bytes, the probes (double hashing) from the next 8. */
function hashed(stream: string): Hashed {
  const d = createHash('sha256').update(stream, 'utf8').digest();
  return { bucket: d.readUInt32BE(0) % filterBuckets, h1: d.readUInt32BE(4), h2: d.readUInt32BE(8) | 1 };
}

export const bucketOf = (stream: string): number => hashed(stream).bucket;

/** The bit of probe `i` in a part of `m` bits. */
const probe = (h: Hashed, i: number, m: number): number => ((h.h1 + Math.imul(i, h.h2)) >>> 0) % m;

/** A segment's filter: one part per bucket, each `[version, ...bits]`; an empty bucket's part is the version byte alone. */
export function buildStreamFilter(streams: Iterable<string>): Buffer[] {
  const byBucket: Hashed[][] = Array.from({ length: filterBuckets }, () => []);
  for (const s of new Set(streams)) {
    const h = hashed(s);
    byBucket[h.bucket]!.push(h);
  }
  return byBucket.map((hs) => {
    const bytes = Math.ceil((hs.length * bitsPerStream) / 8);
    const part = Buffer.alloc(1 + bytes);
    part[0] = filterVersion;
    const m = bytes * 8;
    for (const h of hs)
      for (let i = 0; i < probes; i++) {
        const at = probe(h, i, m);
        part[1 + (at >>> 3)]! |= 1 << (at & 7);
      }
    return part;
  });
}

/**
 * Whether the part of `stream`'s bucket says the segment may hold it. A part of another version
 * (a newer Converge wrote it) answers yes: the segment is opened, as one without a filter is.
 */
export function partMayHold(part: Uint8Array, stream: string): boolean {
  if (part.length === 0 || part[0] !== filterVersion) return true;
  const m = (part.length - 1) * 8;
  if (m === 0) return false;
  const h = hashed(stream);
  for (let i = 0; i < probes; i++) {
    const at = probe(h, i, m);
    if ((part[1 + (at >>> 3)]! & (1 << (at & 7))) === 0) return false;
  }
  return true;
}
