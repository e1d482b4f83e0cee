import { createPublicKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { keyIdOf, verifyCheckpoint } from './checkpoint.ts';
import type { EvidenceBundle, EvidenceCheckpoint } from './evidenceFormat.ts';
import { eventLeafHash } from './leaf.ts';
import { verifyConsistency, verifyInclusion } from './merkle.ts';

// The proofs of an evidence bundle checked with nothing but its bytes and a key
// (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge): the
// checkpoints' signatures, the consistency proof to the latest checkpoint, every event's leaf
// recomputed from its stored bytes and proven in the tree, and each stream's revisions without a
// gap. Pure; the fold's answer is checked above the folds (src/readModel/evidence/).

export type EvidenceKind =
  /** No key to check a signature with: neither given nor carried (nothing is claimed). */
  | 'nokey'
  /** A checkpoint, or the bundle's own key, names another key than the one checked with. */
  | 'key'
  /** A checkpoint's signature does not verify. */
  | 'signature'
  /** The tree the proofs are against is not the checkpoint's. */
  | 'tree'
  /** The consistency proof to the latest checkpoint fails. */
  | 'consistency'
  /** Events out of order, or two at one leaf. */
  | 'order'
  /** An event at a leaf past the tree's size. */
  | 'beyond'
  /** An event of a stream the bundle has no business holding. */
  | 'stream'
  /** An event's leaf, from its bytes, is not proven in the tree: its bytes or its proof were changed. */
  | 'inclusion'
  /** A revision missing in a stream: an event was left out. */
  | 'missing'
  /** Proven bytes that do not decode as their event type. */
  | 'decode'
  /** A declaration's signature does not verify with the declaration key. */
  | 'declaration'
  /** The fold over the events does not give the answer the bundle states. */
  | 'answer'
  /** The bundle's moment cannot be read (a time without its zone, as an earlier release wrote): no answer recomputed, nothing claimed. */
  | 'moment'
  /** The bundle is proven against an unsigned head, and that was not accepted. */
  | 'unsigned';

export type EvidenceFinding = Readonly<{ kind: EvidenceKind; position: string | null; message: string }>;

/** The audit key the signatures were checked with, and whence it came. */
export type KeyUsed = Readonly<{ keyId: string; source: 'given' | 'bundle' }>;

export type ProofCheck = Readonly<{ keyUsed: KeyUsed | null; finding: EvidenceFinding | null }>;

export type ProofCheckOptions = Readonly<{
  /** The audit key the auditor holds (--audit-pub); the bundle's own key is used only without it. */
  auditKey: KeyObject | null;
  /** The streams the bundle may hold (the node's, and the observation spans'). */
  streams: ReadonlySet<string>;
}>;

const finding = (kind: EvidenceKind, position: string | null, message: string): EvidenceFinding => ({ kind, position, message });

/** The key to check signatures with: the one given, else the bundle's own; or what is wrong with the bundle's. */
function chooseKey(b: EvidenceBundle, given: KeyObject | null): { key: KeyObject; used: KeyUsed } | EvidenceFinding | null {
  let own: KeyObject | null = null;
  if (b.keys.audit !== null) {
    try {
      own = createPublicKey(b.keys.audit.pem);
    } catch {
      return finding('key', null, "the bundle's audit key is not a PEM public key");
    }
    if (own.asymmetricKeyType !== 'ed25519' || keyIdOf(own) !== b.keys.audit.keyId)
      return finding('key', null, `the bundle's audit key is not the Ed25519 key ${b.keys.audit.keyId} it names`);
  }
  if (given !== null) {
    const want = keyIdOf(given);
    if (own !== null && keyIdOf(own) !== want)
      return finding('key', null, `the bundle carries audit key ${keyIdOf(own)}, not the audit key given (${want})`);
    return { key: given, used: { keyId: want, source: 'given' } };
  }
  return own === null ? null : { key: own, used: { keyId: keyIdOf(own), source: 'bundle' } };
}

function checkSignature(c: EvidenceCheckpoint, key: KeyObject, what: string): EvidenceFinding | null {
  const want = keyIdOf(key);
  if (c.checkpoint.keyId !== want)
    return finding(
      'key',
      c.position,
      `the ${what} checkpoint (size ${c.checkpoint.size}) is signed by key ${c.checkpoint.keyId}, not ${want}`,
    );
  if (!verifyCheckpoint({ checkpoint: c.checkpoint, signature: c.signature }, key))
    return finding(
      'signature',
      c.position,
      `the ${what} checkpoint (size ${c.checkpoint.size}) does not verify with key ${want}: forged or changed`,
    );
  return null;
}

/** The checkpoints and the consistency proof: who signed what, and that the log only grew between them. */
function checkHeads(b: EvidenceBundle, given: KeyObject | null): ProofCheck {
  const cp = b.checkpoint;
  if (b.signed && cp === null) return { keyUsed: null, finding: finding('tree', null, 'a signed bundle with no checkpoint') };
  if (b.signed && (cp!.checkpoint.size !== b.tree.size || cp!.checkpoint.root !== b.tree.root))
    return { keyUsed: null, finding: finding('tree', cp!.position, "the proofs' tree is not the checkpoint's") };
  const signedOnes = [...(b.signed ? [['covering', cp!] as const] : []), ...(b.latest === null ? [] : [['latest', b.latest] as const])];
  const chosen = chooseKey(b, given);
  if (chosen !== null && 'kind' in chosen) return { keyUsed: null, finding: chosen };
  if (signedOnes.length > 0 && chosen === null)
    return { keyUsed: null, finding: finding('nokey', null, 'the bundle carries no audit key: give the one you hold with --audit-pub') };
  const keyUsed = chosen?.used ?? null;
  for (const [what, c] of signedOnes) {
    const f = checkSignature(c, chosen!.key, what);
    if (f !== null) return { keyUsed, finding: f };
  }
  if (b.latest !== null) {
    const latest = { size: b.latest.checkpoint.size, root: b.latest.checkpoint.root };
    const [small, large] = b.signed ? [b.tree, latest] : [latest, b.tree];
    const path = (b.consistency?.path ?? []).map((h) => Buffer.from(h, 'hex'));
    const ok =
      b.consistency !== null &&
      small.size <= large.size &&
      verifyConsistency(small.size, large.size, Buffer.from(small.root, 'hex'), Buffer.from(large.root, 'hex'), path);
    if (!ok)
      return {
        keyUsed,
        finding: finding(
          'consistency',
          b.latest.position,
          `no proof that the tree of ${small.size} is a prefix of the tree of ${large.size}`,
        ),
      };
  }
  return { keyUsed, finding: null };
}

/** Every event: in order, in the tree, of a stream it may hold, its leaf proven; each stream without a gap. */
function checkEvents(b: EvidenceBundle, streams: ReadonlySet<string>): EvidenceFinding | null {
  const root = Buffer.from(b.tree.root, 'hex');
  const nextRevision = new Map<string, bigint>();
  let last: { leafIndex: number; position: bigint } | null = null;
  for (const e of b.events) {
    const position = BigInt(e.position);
    if (last !== null && (e.leafIndex <= last.leafIndex || position <= last.position))
      return finding('order', e.position, `the event at ${e.position} (leaf ${e.leafIndex}) does not come after the one before`);
    last = { leafIndex: e.leafIndex, position };
    if (e.leafIndex >= b.tree.size)
      return finding('beyond', e.position, `the event at ${e.position} is leaf ${e.leafIndex}, past the tree of ${b.tree.size}`);
    if (!streams.has(e.stream)) return finding('stream', e.position, `the event at ${e.position} is in stream ${e.stream}, not the node's`);
    let leaf: Buffer;
    try {
      leaf = eventLeafHash({
        position,
        stream: e.stream,
        revision: BigInt(e.revision),
        type: e.type,
        data: Buffer.from(e.data, 'base64'),
        metadata: Buffer.from(e.metadata, 'base64'),
      });
    } catch (err) {
      return finding('inclusion', e.position, `the event at ${e.position} has no leaf: ${(err as Error).message}`);
    }
    const proof = e.proof.map((h) => Buffer.from(h, 'hex'));
    if (!verifyInclusion(leaf, e.leafIndex, b.tree.size, proof, root))
      return finding(
        'inclusion',
        e.position,
        `the event at ${e.position} (${e.type} in ${e.stream}) is not leaf ${e.leafIndex} of the tree of ${b.tree.size}: its bytes or its proof were changed`,
      );
    const want = nextRevision.get(e.stream) ?? 0n;
    if (BigInt(e.revision) !== want)
      return finding(
        'missing',
        e.position,
        `revision ${want} of ${e.stream} is missing before the event at ${e.position}: an event was left out`,
      );
    nextRevision.set(e.stream, want + 1n);
  }
  return null;
}

/** The bundle's proofs: the first failure by kind and position, or none. An unsigned bundle's proofs are checked too; the caller decides whether to accept it. */
export function checkEvidenceProofs(b: EvidenceBundle, o: ProofCheckOptions): ProofCheck {
  const heads = checkHeads(b, o.auditKey);
  if (heads.finding !== null) return heads;
  return { keyUsed: heads.keyUsed, finding: checkEvents(b, o.streams) };
}
