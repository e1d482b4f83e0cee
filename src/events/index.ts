export * from './events.ts';
export { declarationSentId, reportReceivedId, aliveSeenId, uuidV5 } from './ids.ts';
export { decodeEvent, eventMetadata, currentVersion, isEventType, upcasters } from './upcasters.ts';
export { makeDeclarationSent, makeReportReceived, makeAliveSeen } from './make.ts';
export type { DeclarationToSend, TransportFacts, WithId } from './make.ts';
