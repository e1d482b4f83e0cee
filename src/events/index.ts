export * from './events.ts';
export * from './rollouts.ts';
export { declarationSentId, reportReceivedId, aliveSeenId, rolloutSendId, rolloutEventId, uuidV5 } from './ids.ts';
export { isoMs, isoText } from './isoMs.ts';
export { decodeEvent, decodeEventData, eventMetadata, currentVersion, isEventType, upcasters } from './upcasters.ts';
export { makeDeclarationSent, makeReportReceived, makeAliveSeen } from './make.ts';
export type { DeclarationToSend, TransportFacts, WithId } from './make.ts';
export { makeRolloutEvent } from './makeRollout.ts';
export type { RolloutEventKey } from './makeRollout.ts';
