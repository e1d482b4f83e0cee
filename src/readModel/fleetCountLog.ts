import { createFleetTally, eventTime, isObserved, nodeStatuses, recentLatencyLimit } from '../../projections/index.ts';
import type { At, FleetSummary, FleetSummaryOptions, LivenessState, NodeState, NodeStatus, ObservedSpan } from '../../projections/index.ts';
import type { Recorded } from '../core/events/index.ts';
import { FleetPresence } from './fleetPresence.ts';
import { createIsoParser } from './isoTime.ts';
import { bytesOf, grown } from './typedColumns.ts';

// The fleet's history as typed arrays (fleetHistory.ts says what is kept and why): rows of what
// the fleet summary reads of each node's state as it changed, presence intervals (fleetPresence.ts),
// and (position, time) samples; and the fleet summary as of a position or a time, made from them.

export type FleetAsOf = FleetSummary &
  Readonly<{
    /** The position the fleet is shown as of: the asked one (or the last folded, if earlier); for a time, where the store stood then (to the second). */
    position: string | null;
    /** The time liveness is judged at: the asked time, or the time of the position (to the second). */
    moment: string | null;
  }>;

/** A status's code in a row: its index in nodeStatuses, with caughtUpBit beside it. */
const statusCode = new Map(nodeStatuses.map((s, i) => [s, i]));
const caughtUpBit = 8;
/** The node was retired as of this row: out of the fleet (docs/design.md §3 "Retired nodes"). */
const retiredBit = 16;
const sampleEveryMs = 1_000;
const countsPerRow = 5; // stale, unknown, undeclared, acknowledged, superseded

const parseIso = createIsoParser();

/** What the fleet tally reads of a node's state (projections/fleet/fleetTally.ts), refilled in place for each row. */
type RowState = {
  status: NodeStatus;
  caughtUp: boolean;
  sent: { specDigest: string } | null;
  sentOf: { specDigest: string };
  /** Always null: a retired row is left out before the tally sees it. */
  retiredAt: null;
  convergence: { recentLatenciesMs: number[]; acknowledged: number; superseded: number };
  anomalies: { stale: number; unknown: number; undeclared: number };
};
const createRowState = (): RowState => ({
  status: 'undeclared',
  caughtUp: false,
  sent: null,
  sentOf: { specDigest: '' },
  retiredAt: null,
  convergence: { recentLatenciesMs: [], acknowledged: 0, superseded: 0 },
  anomalies: { stale: 0, unknown: 0, undeclared: 0 },
});

/** The history of one fold, from the first event it heard; fleetHistory.ts starts another when it must fold again. */
export class FleetCountLog {
  // Rows (one per summary-relevant change), in position order; `prev` links a node's rows newest to oldest.
  private rowCap = 1024;
  private rows = 0;
  private rowPosition = new BigInt64Array(this.rowCap);
  private rowPrev = new Int32Array(this.rowCap);
  /**
   * The earliest time among the node's events this row stands for (its own and those after it that
   * changed nothing counted here): "as of T" is the node's last event recorded at or before T in
   * position order (projections/node/forensics.ts), so its row is the newest one with an event at or before T.
   */
  private rowTime = new Float64Array(this.rowCap);
  private rowStatus = new Uint8Array(this.rowCap);
  private rowSpec = new Int32Array(this.rowCap);
  private rowCounts = new Int32Array(this.rowCap * countsPerRow);
  private rowLatency = new Float64Array(this.rowCap);
  /** The newest row at or before this one, of the same node, that acknowledged a declaration (-1: none). */
  private rowLastLatency = new Int32Array(this.rowCap);

  private readonly presence: FleetPresence;

  // Per node: newest row.
  private readonly nodeIds: string[] = [];
  private readonly nodeIndex = new Map<string, number>();
  private nodeCap = 1024;
  private rowHead = new Int32Array(this.nodeCap).fill(-1);

  private readonly specIds: string[] = [];
  private readonly specIndex = new Map<string, number>();

  private sampleCap = 256;
  private samples = 0;
  private samplePosition = new BigInt64Array(this.sampleCap);
  private sampleTime = new Float64Array(this.sampleCap);
  private maxTime = -Infinity;
  private head: bigint | null = null;
  private first: bigint | null = null;

  constructor(graceMs: number) {
    this.presence = new FleetPresence(graceMs);
  }

  firstPosition(): bigint | null {
    return this.first;
  }

  /** What is held: rows, presence intervals, bytes of typed arrays. */
  stats(): { rows: number; intervals: number; bytes: number } {
    return {
      rows: this.rows,
      intervals: this.presence.intervals(),
      bytes: bytesOf([
        this.rowPosition,
        this.rowPrev,
        this.rowTime,
        this.rowStatus,
        this.rowSpec,
        this.rowCounts,
        this.rowLatency,
        this.rowLastLatency,
        this.rowHead,
        ...this.presence.columns(),
        this.samplePosition,
        this.sampleTime,
      ]),
    };
  }

  /** Called for every folded event, in position order, with the node's state after it. */
  record(node: string, e: Recorded, s: NodeState): void {
    const n = this.nodeIdx(node);
    const t = parseIso(eventTime(e));
    this.first ??= e.position;
    this.head = e.position;
    if (e.type === 'NodeHeard') this.presence.transition(n, parseIso(e.data.at), Infinity, e.position);
    else if (e.type === 'NodeSilent') {
      // Connected up to the millisecond before the engine observed the silence, disconnected from
      // then on, as the node's own fold of this event says (times are whole milliseconds).
      const last = parseIso(e.data.lastSeenAt);
      this.presence.transition(n, last, parseIso(e.data.observedAt) - last - 1, e.position);
    }
    if (s.lastSeenAt !== null) this.presence.lastSeen(n, parseIso(s.lastSeenAt), e.position);
    const status = statusCode.get(s.status)! | (s.caughtUp ? caughtUpBit : 0) | (s.retiredAt !== null ? retiredBit : 0);
    const spec = s.sent === null ? -1 : this.specIdx(s.sent.specDigest);
    const head = this.rowHead[n]!;
    if (this.changed(head, s, status, spec)) this.addRow(n, e.position, s, status, spec, t);
    else if (head >= 0 && t < this.rowTime[head]!) this.rowTime[head] = t;
    if (t > this.maxTime) {
      if (this.samples === 0 || t - this.sampleTime[this.samples - 1]! >= sampleEveryMs) {
        if (this.samples === this.sampleCap) {
          this.sampleCap *= 2;
          this.samplePosition = grown(this.samplePosition, this.sampleCap);
          this.sampleTime = grown(this.sampleTime, this.sampleCap);
        }
        this.samplePosition[this.samples] = e.position;
        this.sampleTime[this.samples] = t;
        this.samples++;
      }
      this.maxTime = t;
    }
  }

  /** The fleet summary with each node as of `at`; `spans`: when engines observed (none: a store from before spans). */
  summarize(at: At, options: FleetSummaryOptions, spans: readonly ObservedSpan[] = []): FleetAsOf {
    const byPosition = at.kind === 'position';
    const p = byPosition ? at.position : 0n;
    const T = byPosition ? 0 : at.time;
    const { head } = this;
    // A position before the first node event is still a moment of the store (an engine's start,
    // a rollout's event): the fleet then had no node, which is an answer, not a missing one.
    const asOf: bigint | null = byPosition ? (head === null || p < 1n ? null : p < head ? p : head) : null;
    let moment = byPosition ? NaN : T;
    if (byPosition) {
      const s = this.lastSampleAtOrBefore(p);
      if (s >= 0) moment = this.sampleTime[s]!;
    }
    // Each node as of the moment goes into the live summary's own tally (projections/fleet/fleetTally.ts):
    // "now" and "as of" are counted and summarised by one definition.
    const tally = createFleetTally();
    const byLiveness: Record<LivenessState, number> = { connected: 0, disconnected: 0, 'never-seen': 0, 'not-observed': 0 };
    const row = createRowState();
    const observed = Number.isNaN(moment) || isObserved(spans, moment);
    for (let n = 0; n < this.nodeIds.length; n++) {
      const r = byPosition ? this.rowAtPosition(n, p) : this.rowAtTime(n, T);
      if (r < 0) continue; // every node's first event leaves a row: no row, no node yet
      if ((this.rowStatus[r]! & retiredBit) !== 0) continue; // retired as of then: not in the fleet
      byLiveness[observed ? this.presence.livenessOf(n, byPosition, p, T, moment) : 'not-observed']++;
      tally.add(this.stateOfRow(r, row));
    }
    const position = byPosition ? asOf : this.lastSampleAtOrBeforeTime(T);
    return {
      ...tally.summary(byLiveness, options),
      position: position === null ? null : position.toString(),
      moment: Number.isNaN(moment) ? null : new Date(moment).toISOString(),
    };
  }

  /** The node's newest row at or before position p (-1: none). */
  private rowAtPosition(n: number, p: bigint): number {
    let r = this.rowHead[n]!;
    while (r >= 0 && this.rowPosition[r]! > p) r = this.rowPrev[r]!;
    return r;
  }

  /** The node's newest row with an event at or before time T (-1: none). */
  private rowAtTime(n: number, T: number): number {
    let r = this.rowHead[n]!;
    while (r >= 0 && this.rowTime[r]! > T) r = this.rowPrev[r]!;
    return r;
  }

  /**
   * Row r as the fields of a node state the tally reads, refilled into `into` (one object for
   * every node: it is handed to FleetTally.add and to nothing else).
   */
  private stateOfRow(r: number, into: RowState): NodeState {
    const st = this.rowStatus[r]!;
    into.status = nodeStatuses[st & 7]!;
    into.caughtUp = (st & caughtUpBit) !== 0;
    const spec = this.rowSpec[r]!;
    if (spec < 0) into.sent = null;
    else {
      into.sentOf.specDigest = this.specIds[spec]!;
      into.sent = into.sentOf;
    }
    const c = r * countsPerRow;
    into.anomalies.stale = this.rowCounts[c]!;
    into.anomalies.unknown = this.rowCounts[c + 1]!;
    into.anomalies.undeclared = this.rowCounts[c + 2]!;
    into.convergence.acknowledged = this.rowCounts[c + 3]!;
    into.convergence.superseded = this.rowCounts[c + 4]!;
    // The node's most recent latencies, as its state keeps them (projections/node/nodeState.ts).
    const recent = into.convergence.recentLatenciesMs;
    recent.length = 0;
    let l = this.rowLastLatency[r]!;
    for (let k = 0; k < recentLatencyLimit && l >= 0; k++) {
      recent.push(this.rowLatency[l]!);
      const q = this.rowPrev[l]!;
      l = q >= 0 ? this.rowLastLatency[q]! : -1;
    }
    return into as unknown as NodeState;
  }

  private nodeIdx(node: string): number {
    let n = this.nodeIndex.get(node);
    if (n !== undefined) return n;
    n = this.nodeIds.length;
    this.nodeIds.push(node);
    this.nodeIndex.set(node, n);
    if (n >= this.nodeCap) {
      this.nodeCap *= 2;
      this.rowHead = grown(this.rowHead, this.nodeCap, -1);
      this.presence.addNodes(this.nodeCap);
    }
    return n;
  }

  private specIdx(digest: string): number {
    let i = this.specIndex.get(digest);
    if (i === undefined) {
      i = this.specIds.length;
      this.specIds.push(digest);
      this.specIndex.set(digest, i);
    }
    return i;
  }

  private addRow(n: number, position: bigint, s: NodeState, status: number, spec: number, t: number): void {
    if (this.rows === this.rowCap) {
      this.rowCap *= 2;
      this.rowPosition = grown(this.rowPosition, this.rowCap);
      this.rowPrev = grown(this.rowPrev, this.rowCap);
      this.rowTime = grown(this.rowTime, this.rowCap);
      this.rowStatus = grown(this.rowStatus, this.rowCap);
      this.rowSpec = grown(this.rowSpec, this.rowCap);
      this.rowCounts = grown(this.rowCounts, this.rowCap * countsPerRow);
      this.rowLatency = grown(this.rowLatency, this.rowCap);
      this.rowLastLatency = grown(this.rowLastLatency, this.rowCap);
    }
    const p = this.rowHead[n]!;
    const r = this.rows++;
    this.rowPosition[r] = position;
    this.rowPrev[r] = p;
    this.rowTime[r] = t;
    this.rowStatus[r] = status;
    this.rowSpec[r] = spec;
    const c = r * countsPerRow;
    this.rowCounts[c] = s.anomalies.stale;
    this.rowCounts[c + 1] = s.anomalies.unknown;
    this.rowCounts[c + 2] = s.anomalies.undeclared;
    this.rowCounts[c + 3] = s.convergence.acknowledged;
    this.rowCounts[c + 4] = s.convergence.superseded;
    const acknowledged = s.convergence.acknowledged > (p >= 0 ? this.rowCounts[p * countsPerRow + 3]! : 0);
    this.rowLatency[r] = acknowledged && s.convergence.lastLatencyMs !== null ? s.convergence.lastLatencyMs : NaN;
    this.rowLastLatency[r] = !Number.isNaN(this.rowLatency[r]!) ? r : p >= 0 ? this.rowLastLatency[p]! : -1;
    this.rowHead[n] = r;
  }

  /** Does the node's new state differ from its newest row in anything the summary reads? */
  private changed(p: number, s: NodeState, status: number, spec: number): boolean {
    if (p < 0) return true;
    const c = p * countsPerRow;
    return (
      this.rowStatus[p] !== status ||
      this.rowSpec[p] !== spec ||
      this.rowCounts[c] !== s.anomalies.stale ||
      this.rowCounts[c + 1] !== s.anomalies.unknown ||
      this.rowCounts[c + 2] !== s.anomalies.undeclared ||
      this.rowCounts[c + 3] !== s.convergence.acknowledged ||
      this.rowCounts[c + 4] !== s.convergence.superseded
    );
  }

  private lastSampleAtOrBefore(position: bigint): number {
    let lo = 0;
    let hi = this.samples - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (this.samplePosition[mid]! <= position) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  /** The position of the last sample at or before a time: where the fleet stood then, to the second. */
  private lastSampleAtOrBeforeTime(time: number): bigint | null {
    let lo = 0;
    let hi = this.samples - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sampleTime[mid]! <= time) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found < 0 ? null : this.samplePosition[found]!;
  }
}

/** A new, empty history of one fold. */
export const createCountLog = (graceMs: number): FleetCountLog => new FleetCountLog(graceMs);
