import { readDeclaration } from '../core/declaration/index.ts';
import type { Resource } from '../core/declaration/index.ts';
import { ConvergeError } from '../core/errors.ts';
import { streamOf } from '../core/events/index.ts';
import type { DeclarationSent, Recorded } from '../core/events/index.ts';
import type { EventStore } from '../store/port.ts';

// Restore from history (docs/design.md §2, "Restore from history"): the spec a node had been sent
// at a moment, read from its own stream. Time maps to position by stream order: the node's
// DeclarationSent events are walked in position order up to the first stamped after the moment,
// and the last one before it is the answer. Clocks of several engines may disagree, so a send
// stored later but stamped earlier is never taken in preference to one stored before it.

export type SpecAsOf = Readonly<{
  /** The resources exactly as that declaration's bytes hold them. */
  resources: readonly Resource[];
  specDigest: string;
  serial: number;
  digest: string;
  sentAt: string;
  position: bigint;
}>;

export async function specAsOf(store: EventStore, node: string, asOf: Date): Promise<SpecAsOf> {
  const at = asOf.getTime();
  if (Number.isNaN(at)) throw new ConvergeError('CONVERGE_ERR_BAD_REQUEST', 'the time to restore is not a valid time');
  let chosen: Recorded<DeclarationSent> | null = null;
  for (const e of await store.readStream(streamOf(node))) {
    if (e.type !== 'DeclarationSent') continue;
    const sent = e as Recorded<DeclarationSent>;
    if (Date.parse(sent.data.sentAt) > at) break;
    chosen = sent;
  }
  if (chosen === null)
    throw new ConvergeError('CONVERGE_ERR_NODE_NOT_FOUND', `${node} had been sent no declaration at or before ${asOf.toISOString()}`, {
      details: { node, asOf: asOf.toISOString() },
    });
  // The bytes are the record: the resources are read from them, not rebuilt, so the spec digest is the same.
  const { resources } = readDeclaration(Buffer.from(chosen.data.declaration, 'base64'));
  return {
    resources,
    specDigest: chosen.data.specDigest,
    serial: chosen.data.serial,
    digest: chosen.data.digest,
    sentAt: chosen.data.sentAt,
    position: chosen.position,
  };
}
