import type { KeyObject } from 'node:crypto';
import { checkpointProblem, keyIdOf, verifyCheckpoint } from './checkpoint.ts';
import type { SignedCheckpoint } from './checkpoint.ts';

// The checkpoints checked against the tree recomputed from the log (docs/audit.md#checkpoints-and-witnesses):
// those the log holds (AuditCheckpointed events) and those a witness kept outside the store. Pure:
// the caller walks the log (verifyLog with `rootsAt`) and hands the roots at the sizes asked for.

export type CheckpointKind =
  /** Not a checkpoint in its one canonical form: nothing was signed that could be. */
  | 'malformed'
  /** Signed by another key than the audit key given. */
  | 'key'
  /** The signature does not verify with the audit key: forged, or its fields changed. */
  | 'signature'
  /** Signed a root the log's tree of that size does not have: the log changed since. */
  | 'root'
  /** Signed more events than the log holds: its tail was removed. */
  | 'beyond';

export type LoggedCheckpoint = Readonly<{ position: bigint; signed: SignedCheckpoint }>;

export type CheckpointFinding = Readonly<{ kind: CheckpointKind; position: bigint; size: number; message: string }>;

/** The log's tree as verifyLog left it: its size and its root at the sizes it was asked for. */
export type RecomputedTree = Readonly<{ size: number; roots: ReadonlyMap<number, string> }>;

/** What is wrong with one checkpoint against the tree, or null (signature only when a key is given). */
function problemOf(signed: SignedCheckpoint, tree: RecomputedTree, publicKey: KeyObject | null): [CheckpointKind, string] | null {
  const c = signed.checkpoint;
  const form = checkpointProblem(c);
  if (form !== null) return ['malformed', form];
  if (publicKey !== null) {
    const want = keyIdOf(publicKey);
    if (c.keyId !== want) return ['key', `it is signed by key ${c.keyId}, not the audit key ${want}`];
    if (!verifyCheckpoint(signed, publicKey)) return ['signature', `its signature does not verify with the audit key ${want}`];
  }
  if (c.size > tree.size) return ['beyond', `it signed ${c.size} events, the log holds ${tree.size}: the tail was removed`];
  const root = tree.roots.get(c.size);
  if (root === undefined) return null; // not asked for: the caller did not walk this far
  if (root !== c.root) return ['root', `it signed root ${c.root} for the first ${c.size} events; their tree's root is ${root}`];
  return null;
}

export type LoggedCheck = Readonly<{ checked: number; finding: CheckpointFinding | null }>;

/** The log's own checkpoints, in log order: the first one that fails, by kind. */
export function checkLoggedCheckpoints(
  checkpoints: readonly LoggedCheckpoint[],
  tree: RecomputedTree,
  publicKey: KeyObject | null,
): LoggedCheck {
  let checked = 0;
  for (const { position, signed } of checkpoints) {
    const p = problemOf(signed, tree, publicKey);
    if (p !== null) {
      const size = signed.checkpoint.size;
      return { checked, finding: { kind: p[0], position, size, message: `the checkpoint at ${position} (size ${size}): ${p[1]}` } };
    }
    checked++;
  }
  return { checked, finding: null };
}

export type WitnessEntry = Readonly<{ name: string; signed: SignedCheckpoint }>;

export type WitnessFinding = Readonly<{
  kind: 'root' | 'beyond' | 'malformed';
  name: string;
  size: number;
  /** Whether the witness's checkpoint verifies with the audit key: null when no key was given. */
  signatureValid: boolean | null;
  message: string;
}>;

export type WitnessCheck = Readonly<{ checked: number; finding: WitnessFinding | null }>;

/**
 * A witness's checkpoints against the log's tree, smallest size first. Its signature does not
 * decide: a log rewritten and signed again with a new key must not pass because the witness's
 * copies name the old one. So any root the log's tree does not reproduce is reported, with
 * whether its signature verifies with the key given.
 */
export function checkWitness(entries: readonly WitnessEntry[], tree: RecomputedTree, publicKey: KeyObject | null): WitnessCheck {
  const sorted = [...entries].sort((a, b) => a.signed.checkpoint.size - b.signed.checkpoint.size || a.name.localeCompare(b.name));
  let checked = 0;
  for (const { name, signed } of sorted) {
    const size = signed.checkpoint.size;
    const signatureValid = publicKey === null ? null : verifyCheckpoint(signed, publicKey);
    // The key is not checked here (see above): only the form, the size and the root.
    const p = problemOf(signed, tree, null);
    if (p !== null) {
      const kind = p[0] === 'beyond' || p[0] === 'malformed' ? p[0] : 'root';
      return { checked, finding: { kind, name, size, signatureValid, message: `the witness's ${name} (size ${size}): ${p[1]}` } };
    }
    checked++;
  }
  return { checked, finding: null };
}

/** One checkpoint as a witness keeps it (a file, a webhook's body): the fields and the signature, as JSON. */
export const witnessJson = (signed: SignedCheckpoint): string =>
  `${JSON.stringify({ checkpoint: { ...signed.checkpoint }, signature: signed.signature }, null, 2)}\n`;

/** witnessJson read back, or why it cannot be. */
export function parseWitnessJson(text: string): SignedCheckpoint | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return `not JSON: ${(e as Error).message}`;
  }
  const o = v as { checkpoint?: Record<string, unknown>; signature?: unknown } | null;
  const c = o?.checkpoint;
  if (typeof c !== 'object' || c === null || typeof o?.signature !== 'string') return 'not {checkpoint, signature}';
  const { size, root, at, keyId } = c;
  if (typeof size !== 'number' || typeof root !== 'string' || typeof at !== 'string' || typeof keyId !== 'string')
    return 'checkpoint is not {size, root, at, keyId}';
  const checkpoint = { size, root, at, keyId };
  const problem = checkpointProblem(checkpoint);
  return problem ?? { checkpoint, signature: o.signature };
}

/** The file a folder witness keeps a checkpoint in: sorted by size, one per key and root. */
export const witnessFileName = (signed: SignedCheckpoint): string => {
  const c = signed.checkpoint;
  return `checkpoint-${String(c.size).padStart(16, '0')}-${c.keyId}-${c.root.slice(0, 16)}.json`;
};
