import { nodeView, observedSpans, recordedLivenessAt, stateAt } from '../../../projections/index.ts';
import type { At } from '../../../projections/index.ts';
import type { EvidenceAnswer, EvidenceEvent } from '../../core/audit/evidenceFormat.ts';
import { decodeEventData, observationStream, streamOf } from '../../core/events/index.ts';
import type { ConvergeEvent, Recorded } from '../../core/events/index.ts';

// The answer an evidence bundle states, computed from the bundle's events alone, by the export
// and by the offline check alike: the same folds as `converge state <node> --at`
// (src/readModel/queries.ts stateAsOf), stopped at the same moment, over bytes decoded as the
// store decodes them. Pure.

/** The streams a bundle of `node` may hold: the node's own, and the observation spans liveness reads. */
export const evidenceStreams = (node: string): ReadonlySet<string> => new Set([streamOf(node), observationStream]);

export type DecodedEvidence = Readonly<{ node: readonly Recorded[]; observation: readonly Recorded[] }>;

/** Why an event's proven bytes do not decode, with its position. */
export class EvidenceDecodeError extends Error {
  readonly position: string;
  constructor(position: string, message: string) {
    super(message);
    this.position = position;
  }
}

/**
 * The bundle's events decoded (JSON text, then the type's upcaster and schema, as a store reads
 * them). The event id is not in the leaf, so it is not trusted: each event gets its stream and
 * revision as id. The fold reads an id only to drop a report stored twice, which a store never
 * holds (an append skips an id already stored), so the answer is the store's either way.
 */
export function decodeEvidence(node: string, events: readonly EvidenceEvent[]): DecodedEvidence {
  const own = streamOf(node);
  const out: { node: Recorded[]; observation: Recorded[] } = { node: [], observation: [] };
  for (const e of events) {
    let data: ConvergeEvent['data'];
    try {
      const text = (b64: string): unknown => JSON.parse(Buffer.from(b64, 'base64').toString('utf8'));
      data = decodeEventData(e.type, text(e.data), text(e.metadata));
    } catch (err) {
      throw new EvidenceDecodeError(e.position, `the event at ${e.position} does not decode as ${e.type}: ${(err as Error).message}`);
    }
    const recorded = {
      type: e.type,
      data,
      id: `${e.stream}/${e.revision}`,
      stream: e.stream,
      revision: BigInt(e.revision),
      position: BigInt(e.position),
    } as Recorded;
    if (e.stream === own) out.node.push(recorded);
    else if (e.stream === observationStream) out.observation.push(recorded);
  }
  return out;
}

/** The node's answer as of `at` over decoded events: status, digests, caught up, liveness. */
export function evidenceAnswer(node: string, events: DecodedEvidence, at: At, graceMs: number): EvidenceAnswer {
  const r = stateAt(node, events.node, at);
  // As stateAsOf: the asked time, or by position the time of the last event folded.
  const moment = at.kind === 'time' ? at.time : r.lastEventAt === null ? 0 : Date.parse(r.lastEventAt);
  const liveness = recordedLivenessAt(events.node.slice(0, r.folded), moment, observedSpans(events.observation), graceMs);
  const v = nodeView(r.state, moment, graceMs, liveness);
  return {
    status: v.status,
    caughtUp: v.caughtUp,
    sentDigest: v.sent?.digest ?? null,
    sentSerial: v.sent?.serial ?? null,
    reportedDigest: v.reported?.declared ?? null,
    liveness: { state: v.liveness.state, lastSeenAt: v.liveness.lastSeenAt },
    folded: r.folded,
    position: v.position,
  };
}
