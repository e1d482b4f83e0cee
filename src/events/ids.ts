import { createHash } from 'node:crypto';

// DESIGN §2: event ids are deterministic so a retried append is a no-op in every store.
// They are RFC 4122 version-5 UUIDs (SHA-1, name-based) because EventStoreDB requires UUIDs.

/** Converge's namespace for name-based ids (a fixed random UUID, chosen once). */
export const convergeNamespace = '6f1d7c2e-9a4b-4c8e-8f3a-2b5d9e0c1a47';

export function uuidV5(name: string, namespace: string = convergeNamespace): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const h = createHash('sha1').update(ns).update(name, 'utf8').digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** Same node + serial → same id: two sends cannot both take one serial, and a retry is a no-op. */
export const declarationSentId = (node: string, serial: number): string => uuidV5(`DeclarationSent/${node}/${serial}`);

/**
 * Same message → same id. The broker's message id names a message when the node set one;
 * otherwise the body's own hash does (a node that repeats a report byte for byte says nothing new).
 */
export const reportReceivedId = (node: string, messageId: string | null, body: Uint8Array): string =>
  messageId !== null && messageId !== ''
    ? uuidV5(`ReportReceived/${node}/msg/${messageId}`)
    : uuidV5(`ReportReceived/${node}/sha256/${createHash('sha256').update(body).digest('hex')}`);

/** Alive is coalesced per node and resolution window, so the node + seenAt names it. */
export const aliveSeenId = (node: string, seenAt: string): string => uuidV5(`AliveSeen/${node}/${seenAt}`);
