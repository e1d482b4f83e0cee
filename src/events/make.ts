import { buildDeclaration, digestOf, signDeclaration } from '../declaration/index.ts';
import type { Resource, SigningKey } from '../declaration/index.ts';
import type { Alive, Report } from '../wire/index.ts';
import type { AliveSeen, DeclarationSent, ReportReceived } from './events.ts';
import { aliveSeenId, declarationSentId, reportReceivedId } from './ids.ts';

// Constructors for the three events, each with its deterministic id (DESIGN §2). The engine,
// the lab and the tests all build events here so the ids are derived one way only.

export type WithId<E> = E & Readonly<{ id: string }>;

export type DeclarationToSend = Readonly<{ node: string; serial: number; resources: readonly Resource[]; key: SigningKey; now: Date }>;

/** Build, digest and sign the declaration bytes once, and record them in the event. */
export function makeDeclarationSent({ node, serial, resources, key, now }: DeclarationToSend): WithId<DeclarationSent> {
  const bytes = buildDeclaration({ node, serial, issued: now, resources });
  return {
    id: declarationSentId(node, serial),
    type: 'DeclarationSent',
    data: {
      node,
      serial,
      digest: digestOf(bytes),
      declaration: bytes.toString('base64'),
      signature: signDeclaration(bytes, key).toString('base64'),
      keyId: key.keyId,
      resourceIds: resources.map((r) => r.id),
      sentAt: now.toISOString(),
    },
  };
}

export type TransportFacts = Readonly<{ messageId: string | null; redelivered: boolean; userId: string | null }>;

export function makeReportReceived(report: Report, body: Uint8Array, transport: TransportFacts, receivedAt: Date): WithId<ReportReceived> {
  return {
    id: reportReceivedId(report.node, transport.messageId, body),
    type: 'ReportReceived',
    data: {
      node: report.node,
      declared: report.declared,
      applied: [...report.applied],
      failed: { ...report.failed },
      refused: report.refused,
      carried: [...report.carried],
      receivedAt: receivedAt.toISOString(),
      transport,
    },
  };
}

export function makeAliveSeen(alive: Alive, seenAt: Date): WithId<AliveSeen> {
  const at = seenAt.toISOString();
  return { id: aliveSeenId(alive.node, at), type: 'AliveSeen', data: { node: alive.node, seenAt: at } };
}
