export {
  buildDeclaration,
  digestOf,
  specDigestOf,
  canonicalJson,
  readDeclaration,
  validateSpec,
  checkCarriedPorts,
  requestedPorts,
  resourceSchema,
  specSchema,
  declarationSchema,
} from './declaration.ts';
export type { Declaration, DeclarationInput, Resource, Spec } from './declaration.ts';
export {
  signingKeyFromSeed,
  signingKeyFromPem,
  verifyingKeyFromPem,
  verifyingKeyFromRaw,
  generateSigningKey,
  signingKeyToPem,
  publicKeyToPem,
  signDeclaration,
  verifyDeclaration,
  keyIdOf,
  rawPublicKey,
} from './signing.ts';
export type { SigningKey, VerifyingKey } from './signing.ts';
