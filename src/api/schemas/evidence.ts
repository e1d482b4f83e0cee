import { z } from 'zod';
import { evidenceBundle as bundle } from '../../core/audit/evidenceFormat.ts';
import { named } from '../schemas.ts';

// GET /v1/nodes/:node/evidence (docs/api.md#evidence-bundles): the query, and the bundle itself,
// whose one definition is the core's (src/core/audit/evidenceFormat.ts), so what the API serves
// and what `converge audit check` reads cannot drift apart. Beside schemas.ts, which is full.

export const evidenceQuery = z.object({
  at: z.string().min(1).optional().describe('the moment: an ISO 8601 time or a decimal store position (or give from and to)'),
  from: z.string().min(1).optional().describe('the start of a window; with `to`, which is then the moment'),
  to: z.string().min(1).optional().describe('the end of the window: the moment the answer is as of'),
  unsigned: z
    .enum(['true', 'false'])
    .default('false')
    .describe("when no signed checkpoint covers the events: prove them against the store's head, marked unsigned, instead of 409"),
});

export const evidenceBundle = named(
  'EvidenceBundle',
  bundle,
  "A node's stored events up to a moment with their inclusion proofs, the checkpoints, the keys, and the fold's answer (docs/audit.md)",
);
