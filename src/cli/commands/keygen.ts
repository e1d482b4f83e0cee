import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { keyIdOf } from '../../core/audit/checkpoint.ts';
import type { CliIo } from '../io.ts';
import { generateSigningKey, publicKeyToPem, rawPublicKey, signingKeyToPem } from '../../core/declaration/signing.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { printJson } from '../output.ts';

// A new Ed25519 signing key. Without --out the private key is stdout alone, so `converge keygen >
// key.pem` makes a usable file, and the key id and public key go to stderr for the person. The
// public key is printed as PEM and as the raw 32 bytes in hex, the form a node verifies with
// (docs/declarations.md#the-nodes-public-key).
export const run: Run = async ({ io, values, json }) => {
  if (typeof values.audit === 'string') return auditKeygen(io, resolve(io.cwd, values.audit), json);
  const key = generateSigningKey();
  const pem = signingKeyToPem(key);
  const publicPem = publicKeyToPem(key);
  const publicHex = rawPublicKey(key.publicKey).toString('hex');
  const out = typeof values.out === 'string' ? resolve(io.cwd, values.out) : null;
  if (out !== null) write(out, pem);
  const about = `key id ${key.keyId}\npublic key (hex) ${publicHex}\n${publicPem}`;
  if (json)
    printJson(io, {
      keyId: key.keyId,
      publicKeyHex: publicHex,
      publicKeyPem: publicPem,
      path: out,
      ...(out === null ? { privateKeyPem: pem } : {}),
    });
  else if (out === null) {
    io.stdout(pem);
    io.stderr(about);
  } else io.stdout(`wrote ${out}\n${about}`);
  return 0;
};

/**
 * `--audit <dir>`: the audit key pair (docs/audit.md#checkpoints-and-witnesses), a key of its own
 * and never the declaration key: `audit.key` for `serve --audit-key`, `audit.pub` for
 * `audit verify --audit-pub`, which an auditor may hold without the private key.
 */
function auditKeygen(io: CliIo, dir: string, json: boolean): number {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const keyPath = join(dir, 'audit.key');
  const pubPath = join(dir, 'audit.pub');
  write(keyPath, privateKey.export({ format: 'pem', type: 'pkcs8' }).toString());
  write(pubPath, publicKey.export({ format: 'pem', type: 'spki' }).toString(), 0o644);
  const keyId = keyIdOf(publicKey);
  if (json) printJson(io, { keyId, privateKeyPath: keyPath, publicKeyPath: pubPath });
  else io.stdout(`wrote ${keyPath} (serve --audit-key) and ${pubPath} (audit verify --audit-pub)\naudit key id ${keyId}\n`);
  return 0;
}

/** 0600 and never over an existing file: a private key must not be readable by others or lost by accident. */
function write(path: string, pem: string, mode = 0o600): void {
  try {
    writeFileSync(path, pem, { mode, flag: 'wx' });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ConvergeError(
      'CONVERGE_ERR_KEY_FILE',
      code === 'EEXIST'
        ? `${path} already exists; keygen never writes over a key (choose another --out, or move that file away)`
        : `cannot write ${path} (${code ?? (e as Error).message})`,
      { cause: e, details: { path } },
    );
  }
}
