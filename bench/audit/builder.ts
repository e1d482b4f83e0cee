// The audit tree's builder (src/core/audit/merkle.ts, docs/audit.md) against a bare SHA-256 of the
// same leaves in the same run: the builder hashes each leaf once (with its 0x00 prefix) and then
// about one inner node per leaf, so the ratio says what the tree costs over hashing the events at
// all. A second row adds the leaf encoding of src/core/audit/leaf.ts, as an adapter would run it.
// A third row is `converge audit verify`'s walk (src/core/audit/verifyLog.ts) over the same events.
// Leaves are ~200 bytes, drawn in turn from a pool of distinct ones so that memory holds the pool,
// not a million copies. Passes alternate (baseline, builder, …).
import { createHash } from 'node:crypto';
import { leafBytes } from '../../src/core/audit/leaf.ts';
import type { LeafFields } from '../../src/core/audit/leaf.ts';
import { eventLeafHash } from '../../src/core/audit/leaf.ts';
import { createTreeBuilder } from '../../src/core/audit/merkle.ts';
import { verifyLog } from '../../src/core/audit/verifyLog.ts';
import type { StoredLeaf } from '../../src/core/audit/verifyLog.ts';
import type { BenchReport } from '../support/report.ts';

const poolSize = 10_000;

// A report as the store holds one: a JSON object of about 150 bytes, in a node's stream.
const events: LeafFields[] = Array.from({ length: poolSize }, (_, i) => ({
  position: BigInt(i + 1),
  stream: `node-web-${String(i % 1000).padStart(4, '0')}`,
  revision: BigInt(Math.floor(i / 1000)),
  type: 'ReportReceived',
  data: Buffer.from(
    JSON.stringify({
      node: `web-${String(i % 1000).padStart(4, '0')}`,
      declared: createHash('sha256').update(String(i)).digest('hex'),
      at: new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(),
      ok: i % 7 !== 0,
    }),
  ),
  metadata: Buffer.from('{"v":1}'),
}));
const leaves = events.map((e) => leafBytes(e));
const meanBytes = Math.round(leaves.reduce((s, l) => s + l.length, 0) / leaves.length);

export async function builderRows(report: BenchReport, leafCount: number, passes: number): Promise<void> {
  const rate = (ms: number): number => leafCount / (ms / 1000);

  /** The least anyone hashing every event does: one SHA-256 digest per leaf's bytes. */
  function bareSha256(): number {
    const t = performance.now();
    let sink = 0;
    for (let i = 0; i < leafCount; i++)
      sink ^= createHash('sha256')
        .update(leaves[i % poolSize]!)
        .digest()[0]!;
    const ms = performance.now() - t;
    if (sink === 256) console.log(sink); // keeps the digests from being optimised away
    return rate(ms);
  }

  function builder(): number {
    const t = performance.now();
    const tree = createTreeBuilder();
    for (let i = 0; i < leafCount; i++) tree.append(leaves[i % poolSize]!);
    tree.root();
    return rate(performance.now() - t);
  }

  function encodeAndBuild(): number {
    const t = performance.now();
    const tree = createTreeBuilder();
    for (let i = 0; i < leafCount; i++) tree.append(leafBytes(events[i % poolSize]!));
    tree.root();
    return rate(performance.now() - t);
  }

  // `converge audit verify`'s walk over the same events as a store hands them out (readStored pages of
  // 5,000, each with its stored leaf hash), minus the store's read: every leaf encoded and hashed,
  // compared with the stored one, and folded into the tree, then the root compared with the head.
  const storedHashes: Buffer[] = [];
  const verifyTree = createTreeBuilder();
  for (let i = 0; i < leafCount; i++) {
    const h = eventLeafHash({ ...events[i % poolSize]!, position: BigInt(i + 1) });
    storedHashes.push(h);
    verifyTree.appendLeafHash(h);
  }
  const head = { size: BigInt(leafCount), root: verifyTree.root().toString('hex'), denseFrom: 1n };

  async function verifyWalk(): Promise<number> {
    const t = performance.now();
    const result = await verifyLog({
      head: async () => head,
      read: async (after, limit) => {
        const from = Number(after ?? 0n);
        const page: StoredLeaf[] = [];
        for (let i = from; i < Math.min(leafCount, from + limit); i++) {
          page.push({ ...events[i % poolSize]!, position: BigInt(i + 1), leafHash: storedHashes[i]! });
        }
        return page;
      },
    });
    if (result.finding !== null) throw new Error(`the bench's own log did not verify: ${result.finding.message}`);
    return rate(performance.now() - t);
  }

  const base: number[] = [];
  const built: number[] = [];
  const encoded: number[] = [];
  const verified: number[] = [];
  for (let p = 0; p < passes; p++) {
    base.push(bareSha256());
    built.push(builder());
    encoded.push(encodeAndBuild());
    verified.push(await verifyWalk());
  }

  const size = `${leafCount.toLocaleString('en-US')} leaves of ~${meanBytes} bytes`;
  report.row({ name: `builder.append, ${size}`, unit: 'leaves/s', converge: built, baseline: base });
  report.row({
    name: `leafBytes + builder.append, ${size}`,
    unit: 'leaves/s',
    converge: encoded,
    baseline: base,
    notes: 'the leaf encoded from its fields first, as a store adapter would',
  });
  report.row({
    name: `verifyLog (audit verify's walk), ${size}`,
    unit: 'events/s',
    converge: verified,
    baseline: base,
    notes: 'each leaf encoded, hashed, compared with its stored hash and folded into the tree; the store read not included',
  });
}
