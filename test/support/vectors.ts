import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// The node side's own JSON, produced by the real Go encoder, kept byte for byte in
// test/fixtures/node-side/ (with wire.go and the commit that motivated the design) so the
// repository tests itself wherever it is cloned. test/fixtures/nodeSide.test.ts notices when the
// node side's copy beside the project changes.
export const nodeSideDir = new URL('../fixtures/node-side', import.meta.url).pathname;
export const vectorsDir = join(nodeSideDir, 'vectors');

export const vectorFiles = (): string[] =>
  readdirSync(vectorsDir)
    .filter((f) => f.endsWith('.json'))
    .sort();

/** A vector's bytes as the Go encoder wrote them, less the newline a file ends with. */
export const vectorBytes = (name: string): Buffer => {
  const b = readFileSync(join(vectorsDir, name));
  return b.at(-1) === 0x0a ? b.subarray(0, -1) : b;
};

export type KeysVector = {
  declaration_sha256_hex: string;
  declaration_utf8: string;
  ed25519_public_key_hex: string;
  ed25519_seed_hex: string;
  signature_hex: string;
};
export const keysVector = (): KeysVector => JSON.parse(vectorBytes('signed.keys.json').toString('utf8')) as KeysVector;
