export * from './events.ts';
export * from './rollouts.ts';
export * from './liveness.ts';
export * from './audit.ts';
export * from './retirement.ts';
export * from './holds.ts';
export {
  declarationSentId,
  reportReceivedId,
  aliveSeenId,
  nodeHeardId,
  nodeSilentId,
  observationEventId,
  rolloutSendId,
  rollbackSendId,
  rolloutEventId,
  uuidV5,
} from './ids.ts';
export { isoMs, isoText } from './isoTimeFast.ts';
export { exactNumber } from './exactNumber.ts';
export { decodeEvent, decodeEventData, eventMetadata, currentVersion, isEventType, upcasters } from './upcasters.ts';
export {
  makeDeclarationSent,
  declarationSentOf,
  signDeclarationOf,
  makeReportReceived,
  makeAliveSeen,
  makeNodeHeard,
  makeNodeSilent,
  makeObservationStarted,
  makeObservationStopped,
} from './make.ts';
export type { DeclarationToSend, SignedDeclaration, TransportFacts, WithId } from './make.ts';
export { makeRolloutEvent } from './makeRollout.ts';
export type { RolloutEventKey } from './makeRollout.ts';
export { eventTimeField } from './timeField.ts';
