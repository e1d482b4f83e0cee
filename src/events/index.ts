export * from './events.ts';
export { declarationSentId, reportReceivedId, aliveSeenId, uuidV5 } from './ids.ts';
export { decodeEvent, eventMetadata, currentVersion, isEventType, upcasters } from './upcasters.ts';
