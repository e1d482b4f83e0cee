import { createPublicKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseWitnessJson } from '../../core/audit/checkpointCheck.ts';
import type { LoggedCheckpoint, WitnessEntry } from '../../core/audit/checkpointCheck.ts';
import { ConvergeError } from '../../core/errors.ts';
import { auditStream, signedCheckpointOf } from '../../core/events/index.ts';
import type { EventStore } from '../../store/port.ts';

// What `converge audit verify` checks checkpoints with (docs/audit.md#checkpoints-and-witnesses):
// the audit public key, the log's own AuditCheckpointed events, and a witness folder's files; and
// the declaration public key an evidence bundle's signatures are checked with.

/** The audit public key from a PEM file (a private key's file works too: its public half is taken). */
export function readAuditPub(path: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(readFileSync(path));
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (e as Error).message;
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--audit-pub: cannot use ${path}: ${why}`);
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--audit-pub: ${path} is a ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519`);
  return key;
}

/** The declaration public key (keygen's PEM; a private key's file gives its public half). */
export function readSigningPub(path: string): KeyObject {
  try {
    const key = createPublicKey(readFileSync(path));
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`a ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519`);
    return key;
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (e as Error).message;
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--signing-pub: cannot use ${path}: ${why}`);
  }
}

/** Every checkpoint the log holds, in log order. */
export async function loggedCheckpoints(store: EventStore): Promise<LoggedCheckpoint[]> {
  const out: LoggedCheckpoint[] = [];
  for (const e of await store.readStream(auditStream)) {
    if (e.type === 'AuditCheckpointed') out.push({ position: e.position, signed: signedCheckpointOf(e.data) });
  }
  return out;
}

/** Every checkpoint file in a witness folder; one that cannot be read is a usage mistake (nothing is claimed). */
export function witnessEntries(dir: string): WitnessEntry[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json') && !n.startsWith('.'));
  } catch (e) {
    throw new ConvergeError(
      'CONVERGE_ERR_USAGE',
      `--witness: cannot read ${dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  return names.sort().map((name) => {
    const signed = parseWitnessJson(readFileSync(join(dir, name), 'utf8'));
    if (typeof signed === 'string')
      throw new ConvergeError('CONVERGE_ERR_USAGE', `--witness: ${join(dir, name)} is not a checkpoint: ${signed}`);
    return { name, signed };
  });
}

/**
 * `--threads`: how many threads read and hash the log; 1 (the default) walks it on the command's own
 * thread. The pool's threads each open the store and post their pages across, and on the two-core
 * machine it was measured on they took half as much CPU again and finished later (docs/audit.md#verifying-a-store).
 */
export function threadsOf(value: unknown): number {
  if (value === undefined) return 1;
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > 64)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--threads: expected a whole number from 1 to 64, got ${JSON.stringify(value)}`);
  return n;
}
