import { z } from 'zod';
import type { SignedCheckpoint } from '../audit/checkpoint.ts';
import type { Event } from './events.ts';
import { uuidV5 } from './ids.ts';
import type { WithId } from './make.ts';

// A signed checkpoint of the audit tree kept in the log itself (docs/audit.md#checkpoints-and-witnesses),
// in a stream of its own, so no store needs a table for them. The folds ignore it: it says
// nothing about a node or a rollout, only what the log held when it was signed.

export const auditCheckpointedData = z.object({
  size: z.number().int().min(0),
  root: z.string().regex(/^[0-9a-f]{64}$/),
  at: z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'not an ISO 8601 time'),
  keyId: z.string().regex(/^[0-9a-f]{16}$/),
  /** Ed25519 over checkpointBytes (src/core/audit/checkpoint.ts), standard base64. */
  signature: z.string(),
});

export type AuditCheckpointedData = Readonly<z.infer<typeof auditCheckpointedData>>;
export type AuditCheckpointed = Event<'AuditCheckpointed', AuditCheckpointedData>;
export type AuditEvent = AuditCheckpointed;

export const auditEventTypes = ['AuditCheckpointed'] as const satisfies readonly AuditEvent['type'][];

/** The one stream checkpoints are recorded in (not a node's, nor a rollout's). */
export const auditStream = 'audit';

export const auditEventDataSchemas = { AuditCheckpointed: auditCheckpointedData } as const;

/** Named by key, size and root: the same head signed again by the same key (a retry, a restart) is one event. */
export const auditCheckpointedId = (keyId: string, size: number, root: string): string =>
  uuidV5(`AuditCheckpointed/${keyId}/${size}/${root}`);

export function makeAuditCheckpointed(signed: SignedCheckpoint): WithId<AuditCheckpointed> {
  const { size, root, at, keyId } = signed.checkpoint;
  return {
    id: auditCheckpointedId(keyId, size, root),
    type: 'AuditCheckpointed',
    data: { size, root, at, keyId, signature: signed.signature },
  };
}

/** The checkpoint an event records, in the form checkpoint.ts verifies. */
export const signedCheckpointOf = (d: AuditCheckpointedData): SignedCheckpoint => ({
  checkpoint: { size: d.size, root: d.root, at: d.at, keyId: d.keyId },
  signature: d.signature,
});
