import type { KeyObject } from 'node:crypto';
import { stateAt } from '../../../projections/index.ts';
import type { At } from '../../../projections/index.ts';
import { keyIdOf, verifyCheckpoint } from '../../core/audit/checkpoint.ts';
import { evidenceFormat, evidenceVersion } from '../../core/audit/evidenceFormat.ts';
import type { EvidenceBundle, EvidenceCheckpoint, EvidenceEvent } from '../../core/audit/evidenceFormat.ts';
import { eventLeafHash } from '../../core/audit/leaf.ts';
import type { Hash } from '../../core/audit/merkle.ts';
import { createProofTree } from '../../core/audit/proofTree.ts';
import type { ProofTree } from '../../core/audit/proofTree.ts';
import { ConvergeError } from '../../core/errors.ts';
import { auditStream, observationStream, signedCheckpointOf, streamOf } from '../../core/events/index.ts';
import type { EventStore, StoredRecord } from '../../store/index.ts';
import type { ArchivedStore } from '../../store/archive/withArchive.ts';
import { mustReadArchive } from '../../store/archive/withoutArchive.ts';
import { readNodeStream, readNodeStreamAsOf } from '../queries.ts';
import { decodeEvidence, evidenceAnswer } from './answer.ts';

// An evidence bundle built from a store (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge),
// for `converge audit export` and GET /v1/nodes/:node/evidence alike. The proofs need every
// leaf hash of the tree they are in, so the log is read once up to the larger of the latest
// checkpoint and (unsigned) the head, as `audit verify` reads it, holding about two hashes an event.

export type EvidenceRequest = Readonly<{
  node: string;
  at: At;
  /** The moment as asked, kept in the bundle. */
  atText: string;
  from: string | null;
  graceMs: number;
  /** The audit public key: only checkpoints it signed are used, and it goes in the bundle. Without it, the latest checkpoint's key is followed. */
  auditKey: KeyObject | null;
  declarationKey: KeyObject | null;
  /** No checkpoint covers the events: prove them against the store's head, unsigned, instead of refusing. */
  unsigned: boolean;
  now: () => number;
}>;

type Signed = EvidenceCheckpoint & Readonly<{ size: number }>;

/** The log's checkpoints by one key, smallest first: the key given (those that verify with it), else the latest one's. */
async function checkpointsOf(store: EventStore, key: KeyObject | null): Promise<Signed[]> {
  const all: Signed[] = [];
  for (const e of await store.readStream(auditStream)) {
    if (e.type !== 'AuditCheckpointed') continue;
    const s = signedCheckpointOf(e.data);
    if (key !== null && !verifyCheckpoint(s, key)) continue;
    all.push({ position: e.position.toString(), checkpoint: { ...s.checkpoint }, signature: s.signature, size: s.checkpoint.size });
  }
  const keyId = key === null ? all.at(-1)?.checkpoint.keyId : keyIdOf(key);
  return all.filter((c) => c.checkpoint.keyId === keyId).sort((a, b) => a.size - b.size);
}

type Walked = Readonly<{
  tree: ProofTree;
  kept: (StoredRecord & { leafIndex: number })[];
  positions: bigint[];
  /** Does `tree` hold the leaves around a cut at `size` (a root, proofs or a consistency path at that size)? */
  cuts: (size: number) => boolean;
}>;

/**
 * The first `size` rows of the log as a proof tree, the rows `keep` wants, and the positions of
 * the leaves asked for by index. Over an archive whose segments carry summaries of their leaf
 * ranges, only the node's segments are read (docs/audit.md "Proofs without the whole log").
 */
async function walk(
  store: EventStore,
  size: number,
  node: string,
  keep: (r: StoredRecord) => boolean,
  positionsOf: readonly number[] = [],
): Promise<Walked> {
  if ('archive' in store) {
    const { walkBySummaries } = await import('../../store/archive/proofWalk.ts');
    const bySummaries = await walkBySummaries(store as ArchivedStore, size, streamOf(node), keep, positionsOf);
    // Only a range holding leaf size - 1, or ending at size, can be cut there: the leaves asked for are read.
    if (bySummaries !== null) return { ...bySummaries, cuts: (s) => s === 0 || s === bySummaries.tree.size || positionsOf.includes(s - 1) };
  }
  return walkEvery(store, size, keep, positionsOf);
}

/** Every leaf hash of the first `size` rows. */
async function walkEvery(
  store: EventStore,
  size: number,
  keep: (r: StoredRecord) => boolean,
  positionsOf: readonly number[],
): Promise<Walked> {
  const hashes: Hash[] = [];
  const kept: (StoredRecord & { leafIndex: number })[] = [];
  const positions: bigint[] = [];
  let after: bigint | null = null;
  while (hashes.length < size) {
    const page = await store.readStored({ after, limit: Math.min(1_000, size - hashes.length) });
    if (page.length === 0) break;
    for (const r of page) {
      if (positionsOf.includes(hashes.length)) positions.push(r.position);
      if (keep(r)) kept.push({ ...r, leafIndex: hashes.length });
      hashes.push(eventLeafHash(r));
    }
    after = page.at(-1)!.position;
  }
  return { tree: createProofTree(hashes), kept, positions, cuts: () => true };
}

const hex = (h: Hash): string => h.toString('hex');

/** Does the tree over the stored rows give the root this head says? If not, the log changed since it was signed or kept. */
function mustReproduce(tree: ProofTree, size: number, root: string, what: string): void {
  if (size > tree.size || hex(tree.root(size)) !== root)
    throw new ConvergeError(
      'CONVERGE_ERR_EVIDENCE_LOG_CHANGED',
      `the stored events do not give the root of ${what} (size ${size}, root ${root}): run converge audit verify`,
    );
}

const keyOf = (k: KeyObject | null): EvidenceBundle['keys']['audit'] =>
  k === null ? null : { keyId: keyIdOf(k), pem: k.export({ format: 'pem', type: 'spki' }).toString() };

/** `--at checkpoint`: the moment the newest signed checkpoint proves, the position of the last event it covers. */
export const newestCheckpoint = 'checkpoint';

/**
 * The node's stream, the request's moment (`--at checkpoint` made the position of the last event
 * the newest checkpoint covers), and the log walked once up to what the proofs need.
 */
async function gather(store: EventStore, request: EvidenceRequest, latest: Signed | null) {
  const own = streamOf(request.node);
  const keep = (r: StoredRecord): boolean => r.stream === own || r.stream === observationStream;
  if (request.atText !== newestCheckpoint) {
    // Up to the moment only: the archive's segments past it are not read for the stream (the walk
    // below still reads every row, archived or not: each proof needs every leaf hash of its tree).
    const stream = await readNodeStreamAsOf(store, request.node, request.at);
    // Read after the stream: the head covers every event the stream read returned.
    const head = request.unsigned ? await store.auditHead() : null;
    const size = Math.max(latest?.size ?? 0, head === null ? 0 : Number(head.size));
    const again = (cuts: readonly number[]) => walk(store, size, request.node, keep, cuts);
    return { q: request, stream, head, walked: await again([]), again };
  }
  if (latest === null)
    throw new ConvergeError('CONVERGE_ERR_EVIDENCE_UNSIGNED', `--at ${newestCheckpoint}: the log holds no signed checkpoint yet`);
  // The moment is found in the same walk: the stream read after it holds every event up to it.
  const head = request.unsigned ? await store.auditHead() : null;
  const size = Math.max(latest.size, head === null ? 0 : Number(head.size));
  const again = (cuts: readonly number[]) => walk(store, size, request.node, keep, [latest.size - 1, ...cuts]);
  const walked = await again([]);
  const position = walked.positions[0];
  if (position === undefined)
    throw new ConvergeError(
      'CONVERGE_ERR_EVIDENCE_LOG_CHANGED',
      `the log holds fewer than the ${latest.size} events the checkpoint at position ${latest.position} signed: run converge audit verify`,
    );
  const q: EvidenceRequest = { ...request, at: { kind: 'position', position }, atText: position.toString() };
  return { q, stream: await readNodeStream(store, request.node), head, walked, again };
}

export async function buildEvidence(store: EventStore, request: EvidenceRequest): Promise<EvidenceBundle> {
  // The proofs walk the log from its first leaf: over the hot rows alone an archived store's tree
  // is not the signed one, which must not read as a changed log (LOG_CHANGED) but as a missing archive.
  await mustReadArchive(store, `the evidence of ${request.node}`);
  const own = streamOf(request.node);
  const checkpoints = await checkpointsOf(store, request.auditKey);
  const latest = checkpoints.at(-1) ?? null;
  const { q, stream, head, walked: first, again } = await gather(store, request, latest);
  const needed = new Set(stream.slice(0, stateAt(q.node, stream, q.at).folded).map((e) => e.position));
  const nodeRows = first.kept.filter((r) => r.stream === own && needed.has(r.position));
  const lastLeaf = nodeRows.length < needed.size ? Infinity : (nodeRows.at(-1)?.leafIndex ?? -1);
  const covering = checkpoints.find((c) => c.size > lastLeaf) ?? null;
  // The checkpoints are known only now: a walk from summaries that did not read the leaves where they cut the tree walks again, asking for them.
  const cuts = [covering?.size, latest?.size].filter((s): s is number => s !== undefined && s > 0);
  const all = cuts.every(first.cuts) ? first : await again(cuts.map((s) => s - 1));
  const walked = { ...all, kept: all.kept.filter((r) => r.stream !== own || needed.has(r.position)) };
  const { tree } = walked;
  if (latest !== null) mustReproduce(tree, latest.size, latest.checkpoint.root, `the checkpoint at position ${latest.position}`);
  if (covering === null && head === null) {
    const why =
      latest === null ? 'the log holds no signed checkpoint' : `the latest signed checkpoint covers the first ${latest.size} events`;
    throw new ConvergeError(
      'CONVERGE_ERR_EVIDENCE_UNSIGNED',
      `no signed checkpoint covers ${q.node}'s ${needed.size} events up to ${q.atText}: ${why}. Wait for the next checkpoint, or ask for an unsigned bundle (--unsigned)`,
    );
  }
  const proofSize = covering?.size ?? Number(head!.size);
  const proofRoot = covering?.checkpoint.root ?? head!.root;
  if (covering !== null) mustReproduce(tree, proofSize, proofRoot, `the checkpoint at position ${covering.position}`);
  else mustReproduce(tree, proofSize, proofRoot, "the store's head");

  const events: EvidenceEvent[] = walked.kept
    .filter((r) => r.leafIndex < proofSize)
    .map((r) => ({
      leafIndex: r.leafIndex,
      position: r.position.toString(),
      stream: r.stream,
      revision: r.revision.toString(),
      type: r.type,
      data: Buffer.from(r.data).toString('base64'),
      metadata: Buffer.from(r.metadata).toString('base64'),
      proof: tree.inclusion(r.leafIndex, proofSize).map(hex),
    }));
  const [small, large] = covering !== null ? [proofSize, latest!.size] : [latest?.size ?? 0, proofSize];
  const strip = (c: Signed | null): EvidenceCheckpoint | null =>
    c === null ? null : { position: c.position, checkpoint: c.checkpoint, signature: c.signature };
  return {
    format: evidenceFormat,
    version: evidenceVersion,
    node: q.node,
    at: q.atText,
    from: q.from,
    graceMs: q.graceMs,
    exportedAt: new Date(q.now()).toISOString(),
    signed: covering !== null,
    tree: { size: proofSize, root: proofRoot },
    checkpoint: strip(covering),
    latest: strip(latest),
    consistency: latest === null || small > large ? null : { path: tree.consistency(small, large).map(hex) },
    keys: { audit: keyOf(q.auditKey), declaration: keyOf(q.declarationKey) },
    events,
    answer: evidenceAnswer(q.node, decodeEvidence(q.node, events), q.at, q.graceMs),
  };
}
