import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { generateSigningKey, publicKeyToPem, rawPublicKey, signingKeyToPem } from '../../core/declaration/signing.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { Run } from '../command.ts';
import { printJson } from '../output.ts';

// A new Ed25519 signing key. Without --out the private key is stdout alone, so `converge keygen >
// key.pem` makes a usable file, and the key id and public key go to stderr for the person. The
// public key is printed as PEM and as the raw 32 bytes in hex, the form a node verifies with
// (docs/declarations.md#the-nodes-public-key).
export const run: Run = async ({ io, values, json }) => {
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

/** 0600 and never over an existing file: a private key must not be readable by others or lost by accident. */
function write(path: string, pem: string): void {
  try {
    writeFileSync(path, pem, { mode: 0o600, flag: 'wx' });
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
