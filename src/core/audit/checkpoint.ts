import { createHash, createPublicKey, sign, verify } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

// A signed checkpoint ("signed tree head", RFC 9162 §4.10): the audit tree's size and root at a
// time, signed with Ed25519 by the audit key (docs/audit.md#checkpoints). Whoever keeps a copy can
// later ask for a consistency proof from it to the current tree, and so see a rewritten past.

export type Checkpoint = Readonly<{
  /** Leaves in the tree. */
  size: number;
  /** MTH of those leaves, 64 lowercase hex characters. */
  root: string;
  /** When it was signed, as Date#toISOString writes it. */
  at: string;
  /** keyIdOf the key that signs it. */
  keyId: string;
}>;

export type SignedCheckpoint = Readonly<{ checkpoint: Checkpoint; signature: string }>;

const HEADER = 'converge audit checkpoint v1';
const SPKI_ED25519_PREFIX_LENGTH = 12;

/** Raw 32-byte Ed25519 public key (the last 32 bytes of its SPKI DER). */
const rawPublicKey = (publicKey: KeyObject): Buffer => {
  const der = publicKey.export({ format: 'der', type: 'spki' });
  return der.subarray(SPKI_ED25519_PREFIX_LENGTH);
};

/** First 16 hex characters of SHA-256 over the raw public key, as the declaration keys' id (src/core/declaration/signing.ts). */
export const keyIdOf = (publicKey: KeyObject): string => createHash('sha256').update(rawPublicKey(publicKey)).digest('hex').slice(0, 16);

/** Why a checkpoint cannot be written canonically, or null if it can. */
export function checkpointProblem(c: Checkpoint): string | null {
  if (!Number.isSafeInteger(c.size) || c.size < 0) return `size ${c.size} is not a non-negative safe integer`;
  if (!/^[0-9a-f]{64}$/.test(c.root)) return 'root is not 64 lowercase hex characters';
  const ms = Date.parse(c.at);
  if (Number.isNaN(ms) || new Date(ms).toISOString() !== c.at) return `at ${JSON.stringify(c.at)} is not a time as toISOString writes it`;
  if (!/^[0-9a-f]{16}$/.test(c.keyId)) return 'keyId is not 16 lowercase hex characters';
  return null;
}

/**
 * The signed bytes: one line per field in a fixed order, each field in one spelling only
 * (checkpointProblem refuses any other), so a checkpoint has exactly one encoding. Text rather
 * than JSON so that a person can read what a witness signed, and no JSON encoder is trusted.
 */
export function checkpointBytes(c: Checkpoint): Buffer {
  const problem = checkpointProblem(c);
  if (problem !== null) throw new RangeError(`checkpoint cannot be signed: ${problem}`);
  return Buffer.from(`${HEADER}\nkey ${c.keyId}\nsize ${c.size}\nroot ${c.root}\nat ${c.at}\n`, 'utf8');
}

/** Sign the tree's size and root at `at` with an Ed25519 private key. */
export function signCheckpoint(head: Readonly<{ size: number; root: string; at: string }>, privateKey: KeyObject): SignedCheckpoint {
  if (privateKey.asymmetricKeyType !== 'ed25519')
    throw new RangeError(`the audit key is ${privateKey.asymmetricKeyType ?? 'unknown'}, not ed25519`);
  const checkpoint: Checkpoint = { size: head.size, root: head.root, at: head.at, keyId: keyIdOf(createPublicKey(privateKey)) };
  const signature = sign(null, checkpointBytes(checkpoint), privateKey).toString('base64');
  return { checkpoint, signature };
}

/** True when the checkpoint is well formed, names this key and carries its signature over exactly these fields. */
export function verifyCheckpoint(signed: SignedCheckpoint, publicKey: KeyObject): boolean {
  const { checkpoint, signature } = signed;
  if (publicKey.asymmetricKeyType !== 'ed25519' || checkpointProblem(checkpoint) !== null) return false;
  if (checkpoint.keyId !== keyIdOf(publicKey)) return false;
  const bytes = Buffer.from(signature, 'base64');
  if (bytes.length !== 64 || bytes.toString('base64') !== signature) return false;
  return verify(null, checkpointBytes(checkpoint), publicKey, bytes);
}
