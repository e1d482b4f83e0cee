import type { ConvergeEventType } from './events.ts';

// The field of each event's data that holds the time the engine recorded it (the only clock an
// event carries; projections/node/forensics.ts eventTime reads the same). A store that groups
// events by age in SQL (EventStore.stats) reads this field of the stored JSON.
export const eventTimeField: Readonly<Record<ConvergeEventType, string>> = {
  DeclarationSent: 'sentAt',
  ReportReceived: 'receivedAt',
  AliveSeen: 'seenAt',
  NodeHeard: 'at',
  NodeSilent: 'observedAt',
  NodeRetired: 'at',
  NodeHeld: 'at',
  NodeReleased: 'at',
  NodePinned: 'at',
  NodeUnpinned: 'at',
  ObservationStarted: 'at',
  ObservationStopped: 'at',
  AuditCheckpointed: 'at',
  RolloutStarted: 'startedAt',
  RolloutNodesListed: 'listedAt',
  WaveStarted: 'startedAt',
  RolloutSent: 'sentAt',
  WaveCompleted: 'completedAt',
  RolloutPaused: 'at',
  RolloutResumed: 'at',
  RolloutHalted: 'at',
  RolloutCompleted: 'at',
  RolloutAborted: 'at',
  RollbackStarted: 'at',
  RollbackSent: 'sentAt',
  RollbackCompleted: 'at',
  WaveGateChecked: 'at',
};
