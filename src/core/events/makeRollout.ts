import { rolloutEventId, uuidV5 } from './ids.ts';
import type { WithId } from './make.ts';
import type { RolloutEvent, RolloutEventType } from './rollouts.ts';

// Constructors for a rollout's events, each with its deterministic id: the driver,
// the API, the CLI and the tests build them here, so an id is derived one way only.

type DataOf<T extends RolloutEventType> = Extract<RolloutEvent, { type: T }>['data'];

/**
 * What makes each event unique in its stream: the wave for wave events, the list's offset for
 * node lists, one start and one end per rollout, and for the rest (sends, pauses, resumes) the
 * stream revision the decision was taken at — the revision the append expects. A RolloutSent is
 * named by the nodes it lists as well: two drivers that decided to send at one revision in
 * batches of different nodes must not take the second's append for a retry of the first (the
 * store would then keep the second's declarations to the nodes the first did not list, and no
 * RolloutSent would name them). A retry from the same decision lists the same nodes.
 */
export type RolloutEventKey = Readonly<{ revision: bigint }>;

function keyOf<T extends RolloutEventType>(type: T, data: DataOf<T>, at: RolloutEventKey): string | number | bigint {
  switch (type) {
    case 'RolloutStarted':
      return 'start';
    case 'RolloutNodesListed':
      return (data as DataOf<'RolloutNodesListed'>).from;
    case 'WaveStarted':
    case 'WaveCompleted':
      return (data as DataOf<'WaveStarted'>).wave;
    case 'RolloutHalted':
    case 'RolloutCompleted':
    case 'RolloutAborted':
      return 'end';
    // One rollback per rollout: the driver's (rollbackOnHalt) and an operator's cannot both start one.
    case 'RollbackStarted':
      return 'rollback';
    case 'RollbackCompleted':
      return 'rollback-end';
    case 'RolloutSent':
    case 'RollbackSent': {
      const d = data as DataOf<'RolloutSent'>;
      const listed = [...d.sends.map((x) => x.node), ...d.skipped.map((x) => x.node)].join('\n');
      return `${at.revision}/${uuidV5(listed)}`;
    }
    default:
      return at.revision;
  }
}

export function makeRolloutEvent<T extends RolloutEventType>(
  type: T,
  data: DataOf<T>,
  at: RolloutEventKey = { revision: -1n },
): WithId<Extract<RolloutEvent, { type: T }>> {
  return { id: rolloutEventId(data.rollout, type, keyOf(type, data, at)), type, data } as WithId<Extract<RolloutEvent, { type: T }>>;
}
