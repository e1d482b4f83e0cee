import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { generateSigningKey, publicKeyToPem, signingKeyToPem } from '../../declaration/signing.ts';
import type { Run } from '../command.ts';
import { printJson } from '../output.ts';

export const run: Run = async ({ io, values, json }) => {
  const key = generateSigningKey();
  const pem = signingKeyToPem(key);
  const out = typeof values.out === 'string' ? resolve(io.cwd, values.out) : null;
  // 0600 and never overwrite: a private key must not be readable by others or lost by accident.
  if (out !== null) writeFileSync(out, pem, { mode: 0o600, flag: 'wx' });
  if (json)
    printJson(io, { keyId: key.keyId, publicKeyPem: publicKeyToPem(key), path: out, ...(out === null ? { privateKeyPem: pem } : {}) });
  else if (out === null) io.stdout(pem);
  else io.stdout(`wrote ${out}\nkey id ${key.keyId}\n${publicKeyToPem(key)}`);
  return 0;
};
