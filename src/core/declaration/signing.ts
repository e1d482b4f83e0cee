import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { ConvergeError } from '../errors.ts';

// Ed25519 over the exact declaration bytes (docs/design.md §1, ADR 0004): sign(null, bytes, key).

export type SigningKey = Readonly<{ privateKey: KeyObject; publicKey: KeyObject; keyId: string }>;
export type VerifyingKey = Readonly<{ publicKey: KeyObject; keyId: string }>;

// RFC 8410 PKCS#8 wrapping of a raw 32-byte Ed25519 seed, and SPKI of a raw public key.
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Raw 32-byte public key. */
export function rawPublicKey(publicKey: KeyObject): Buffer {
  const der = publicKey.export({ format: 'der', type: 'spki' });
  return der.subarray(der.length - 32);
}

/** Key id: first 16 hex chars of sha256 over the raw public key, so any holder can compute it. */
export const keyIdOf = (publicKey: KeyObject): string => createHash('sha256').update(rawPublicKey(publicKey)).digest('hex').slice(0, 16);

function fromPrivate(privateKey: KeyObject): SigningKey {
  if (privateKey.asymmetricKeyType !== 'ed25519') {
    throw new ConvergeError('CONVERGE_ERR_KEY_INVALID', `signing key is ${privateKey.asymmetricKeyType ?? 'unknown'}, not ed25519`);
  }
  const publicKey = createPublicKey(privateKey);
  return Object.freeze({ privateKey, publicKey, keyId: keyIdOf(publicKey) });
}

export function signingKeyFromSeed(seed: Uint8Array): SigningKey {
  if (seed.length !== 32) throw new ConvergeError('CONVERGE_ERR_KEY_INVALID', `an Ed25519 seed is 32 bytes, got ${seed.length}`);
  return fromPrivate(createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' }));
}

export function signingKeyFromPem(pem: string | Buffer): SigningKey {
  try {
    return fromPrivate(createPrivateKey(pem));
  } catch (cause) {
    if (cause instanceof ConvergeError) throw cause;
    throw new ConvergeError('CONVERGE_ERR_KEY_INVALID', 'signing key is not a PEM private key', { cause });
  }
}

export function verifyingKeyFromPem(pem: string | Buffer): VerifyingKey {
  try {
    const publicKey = createPublicKey(pem);
    if (publicKey.asymmetricKeyType !== 'ed25519') throw new Error(`key type ${publicKey.asymmetricKeyType ?? 'unknown'}`);
    return Object.freeze({ publicKey, keyId: keyIdOf(publicKey) });
  } catch (cause) {
    throw new ConvergeError('CONVERGE_ERR_KEY_INVALID', 'verifying key is not an Ed25519 PEM public key', { cause });
  }
}

export function verifyingKeyFromRaw(raw: Uint8Array): VerifyingKey {
  if (raw.length !== 32) throw new ConvergeError('CONVERGE_ERR_KEY_INVALID', `an Ed25519 public key is 32 bytes, got ${raw.length}`);
  const publicKey = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: 'der', type: 'spki' });
  return Object.freeze({ publicKey, keyId: keyIdOf(publicKey) });
}

export function generateSigningKey(): SigningKey {
  return fromPrivate(generateKeyPairSync('ed25519').privateKey);
}

export const signingKeyToPem = (k: SigningKey): string => k.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
export const publicKeyToPem = (k: VerifyingKey | SigningKey): string => k.publicKey.export({ format: 'pem', type: 'spki' }).toString();

export const signDeclaration = (bytes: Uint8Array, key: SigningKey): Buffer => sign(null, bytes, key.privateKey);

/** Verify the bytes as received; never re-encode first. */
export function verifyDeclaration(bytes: Uint8Array, signature: Uint8Array, key: VerifyingKey): boolean {
  if (signature.length !== 64) return false;
  return verify(null, bytes, key.publicKey, signature);
}
