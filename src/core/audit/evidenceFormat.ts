import { z } from 'zod';

// An evidence bundle (docs/audit.md#evidence-bundles-how-an-auditor-checks-one-with-nothing-but-converge):
// one node's stored events up to a moment, exactly as stored, each with its inclusion proof
// against one tree (a signed checkpoint's, or the store's unsigned head when asked), a
// consistency proof to the latest signed checkpoint, the public keys, and the fold's answer. One
// JSON document, read by `converge audit check` and served by GET /v1/nodes/:node/evidence. The
// schema is the one definition: the API's OpenAPI document is made from it.

export const evidenceFormat = 'converge-evidence';
export const evidenceVersion = 1;

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, '64 lowercase hex characters');
const decimal = z.string().regex(/^\d{1,20}$/, 'a decimal string');
const base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'standard base64');
const size = z.number().int().min(0);

export const evidenceTree = z
  .object({ size, root: hex64 })
  .describe('a tree of the audit log: its size (leaves) and root (MTH, docs/audit.md)');

export const evidenceCheckpoint = z
  .object({
    position: decimal.describe('where the AuditCheckpointed event that records it is in the log'),
    checkpoint: z.object({ size, root: hex64, at: z.string(), keyId: z.string() }),
    signature: z.string().describe('Ed25519 over the checkpoint bytes (docs/audit.md#checkpoints), standard base64'),
  })
  .describe('a signed checkpoint as the log holds it');

export const evidenceEvent = z
  .object({
    leafIndex: size.describe('the leaf this event is in the tree'),
    position: decimal,
    stream: z.string(),
    revision: decimal,
    type: z.string(),
    data: base64.describe('the data bytes exactly as stored (base64 of the stored JSON text)'),
    metadata: base64.describe('the metadata bytes exactly as stored (base64)'),
    proof: z.array(hex64).describe('inclusion proof of the leaf in `tree`, leaf first (RFC 9162 §2.1.3)'),
  })
  .describe('one stored event; its leaf (docs/audit.md#the-leaf) is recomputed from these fields');

export const evidenceKey = z.object({ keyId: z.string(), pem: z.string().describe('SPKI PEM of the Ed25519 public key') });

export const evidenceAnswer = z
  .object({
    status: z.string(),
    caughtUp: z.boolean(),
    sentDigest: hex64.nullable(),
    sentSerial: z.number().int().nullable(),
    reportedDigest: hex64.nullable(),
    liveness: z.object({ state: z.string(), lastSeenAt: z.string().nullable() }),
    folded: size.describe("the node's events folded"),
    position: decimal.describe('the last position folded'),
  })
  .describe("the node fold's answer as of the moment, from the bundle's events alone");

export const evidenceBundle = z
  .object({
    format: z.literal(evidenceFormat),
    version: z.literal(evidenceVersion),
    node: z.string(),
    at: z.string().describe('the moment: an ISO 8601 time or a decimal store position'),
    from: z.string().nullable().describe('the start of the window asked for (--from), or null'),
    graceMs: z.number().int().min(0).describe("the reader's grace, for a history recorded before liveness transitions"),
    exportedAt: z.string(),
    signed: z.boolean().describe('false: the proofs are against the store head at export, which nobody signed'),
    tree: evidenceTree.describe("the tree every event's proof is against: the checkpoint's, or the unsigned head"),
    checkpoint: evidenceCheckpoint.nullable().describe('the first signed checkpoint that covers every event (null when unsigned)'),
    latest: evidenceCheckpoint.nullable().describe('the latest signed checkpoint in the log at export'),
    consistency: z
      .object({ path: z.array(hex64) })
      .nullable()
      .describe('proof that the smaller of `tree` and `latest` is a prefix of the larger (RFC 9162 §2.1.4); null when there is no latest'),
    keys: z.object({
      audit: evidenceKey.nullable().describe('the audit public key; proves nothing alone: compare it with the key you hold'),
      declaration: evidenceKey.nullable().describe('the declaration signing public key, when the exporter had it'),
    }),
    events: z.array(evidenceEvent),
    answer: evidenceAnswer,
  })
  .describe("An evidence bundle: a node's stored events up to a moment with their proofs, the keys, and the fold's answer");

export type EvidenceBundle = z.infer<typeof evidenceBundle>;
export type EvidenceEvent = z.infer<typeof evidenceEvent>;
export type EvidenceCheckpoint = z.infer<typeof evidenceCheckpoint>;
export type EvidenceAnswer = z.infer<typeof evidenceAnswer>;

/** The bundle read from its JSON text, or why it is not one. */
export function parseEvidence(text: string): EvidenceBundle | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return `not JSON: ${(e as Error).message}`;
  }
  const format = (v as { format?: unknown; version?: unknown } | null)?.format;
  const version = (v as { version?: unknown } | null)?.version;
  if (format !== evidenceFormat) return `not an evidence bundle (format ${JSON.stringify(format)})`;
  if (version !== evidenceVersion) return `evidence format version ${JSON.stringify(version)}; this converge reads ${evidenceVersion}`;
  const r = evidenceBundle.safeParse(v);
  if (!r.success) {
    const i = r.error.issues[0]!;
    return `${i.path.join('.') || 'bundle'}: ${i.message}`;
  }
  return r.data;
}
