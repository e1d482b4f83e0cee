import {
  createLatencyHistogram,
  defaultGraceMs,
  eventTime,
  foldNode,
  initialNodeState,
  recentLatencyLimit,
  summarizeCounts,
} from '../../projections/index.ts';
import type { At, FleetSummary, FleetSummaryOptions, LivenessState, NodeState, NodeStatus } from '../../projections/index.ts';
import type { Recorded } from '../core/events/index.ts';
import { isNodeEvent, nodeOfStream } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';
import type { NodeChange, ReadModel } from './readModel.ts';
import { createIsoParser } from './isoTime.ts';

// GET /v1/fleet?at= (issue 11): the fleet as of a time or position, fast enough to drag a slider.
//
// Folding the store up to the asked moment on every request reads the whole history (seconds at
// 1M events). Instead, as the read model folds, this keeps in typed arrays what the fleet summary
// reads of each node's state, as it changed:
// - a *row* each time a node's status, spec, anomaly or convergence counters change (sends and
//   reports; an alive or a repeated report changes none of them and adds no row);
// - its *presence* as intervals of sightings no more than the grace period apart, so a node that
//   says alive every 15 s for a month is one interval, not 170,000 rows;
// - one (position, time) sample per second of history, for the moment a position stands for.
// A node as of p is its last row at or before p, found by walking its rows back from the newest;
// the summary is one pass over the nodes. Memory grows with changes and disconnections, not with
// time. Liveness inside an interval is exact when event times follow positions, as the engine's
// appends do.
//
// The history must start at the store's first event. A read model restored from a snapshot folds
// only what came after it, so the first question then folds the store once from zero up to the
// read model's position (live changes meanwhile are buffered and appended after).

export type FleetAsOf = FleetSummary &
  Readonly<{
    /** The position the fleet is shown as of: the asked one (or the last folded, if earlier); for a time, where the store stood then (to the second). */
    position: string | null;
    /** The time liveness is judged at: the asked time, or the time of the position (to the second). */
    moment: string | null;
  }>;

export type FleetHistory = Readonly<{
  at: (at: At, options?: FleetSummaryOptions) => Promise<FleetAsOf>;
  /** What is held: rows, presence intervals, bytes of typed arrays; complete = starts at the store's first event (null: not checked yet). */
  stats: () => Readonly<{ rows: number; intervals: number; bytes: number; complete: boolean | null }>;
  stop: () => void;
}>;

const statuses: readonly NodeStatus[] = ['undeclared', 'behind', 'refused', 'degraded', 'converged'];
const statusCode = new Map(statuses.map((s, i) => [s, i]));
const caughtUpBit = 8;
const sampleEveryMs = 1_000;
const countsPerRow = 5; // stale, unknown, undeclared, acknowledged, superseded

type Column = BigInt64Array | Int32Array | Float64Array | Uint8Array;
const grown = <T extends Column>(a: T, size: number, fill?: number): T => {
  const b = new (a.constructor as new (n: number) => T)(size);
  if (fill !== undefined) (b as Int32Array).fill(fill);
  b.set(a as never);
  return b;
};
const bytesOf = (cols: readonly Column[]): number => cols.reduce((n, c) => n + c.byteLength, 0);

const parseIso = createIsoParser();

function createLog(graceMs: number) {
  // Rows (one per summary-relevant change), in position order; `prev` links a node's rows newest to oldest.
  let rowCap = 1024;
  let rows = 0;
  let rowPosition = new BigInt64Array(rowCap);
  let rowPrev = new Int32Array(rowCap);
  /** The node's latest event time up to this row, a running max: a fold "as of T" stops at the node's first event after T. */
  let rowTime = new Float64Array(rowCap);
  let rowStatus = new Uint8Array(rowCap);
  let rowSpec = new Int32Array(rowCap);
  let rowCounts = new Int32Array(rowCap * countsPerRow);
  let rowLatency = new Float64Array(rowCap);
  /** The newest row at or before this one, of the same node, that acknowledged a declaration (-1: none). */
  let rowLastLatency = new Int32Array(rowCap);

  // Presence intervals: consecutive sightings at most graceMs apart; a longer silence starts a new one.
  let ivCap = 1024;
  let intervals = 0;
  let ivPrev = new Int32Array(ivCap);
  let ivStart = new Float64Array(ivCap);
  let ivEnd = new Float64Array(ivCap);
  let ivStartPosition = new BigInt64Array(ivCap);

  // Per node: newest row, newest interval, latest event time, latest sighting.
  const nodeIds: string[] = [];
  const nodeIndex = new Map<string, number>();
  let nodeCap = 1024;
  let rowHead = new Int32Array(nodeCap).fill(-1);
  let ivHead = new Int32Array(nodeCap).fill(-1);
  let nodeTime = new Float64Array(nodeCap);
  let nodeSeen = new Float64Array(nodeCap).fill(NaN);

  const specIds: string[] = [];
  const specIndex = new Map<string, number>();

  let sampleCap = 256;
  let samples = 0;
  let samplePosition = new BigInt64Array(sampleCap);
  let sampleTime = new Float64Array(sampleCap);
  let maxTime = -Infinity;
  let head: bigint | null = null;
  let first: bigint | null = null;

  function nodeIdx(node: string): number {
    let n = nodeIndex.get(node);
    if (n !== undefined) return n;
    n = nodeIds.length;
    nodeIds.push(node);
    nodeIndex.set(node, n);
    if (n >= nodeCap) {
      nodeCap *= 2;
      rowHead = grown(rowHead, nodeCap, -1);
      ivHead = grown(ivHead, nodeCap, -1);
      nodeTime = grown(nodeTime, nodeCap);
      nodeSeen = grown(nodeSeen, nodeCap, NaN);
    }
    nodeTime[n] = -Infinity;
    return n;
  }

  function specIdx(digest: string): number {
    let i = specIndex.get(digest);
    if (i === undefined) {
      i = specIds.length;
      specIds.push(digest);
      specIndex.set(digest, i);
    }
    return i;
  }

  function sight(n: number, at: number, position: bigint): void {
    const h = ivHead[n]!;
    if (h >= 0 && at - ivEnd[h]! <= graceMs) {
      ivEnd[h] = at;
      return;
    }
    if (intervals === ivCap) {
      ivCap *= 2;
      ivPrev = grown(ivPrev, ivCap);
      ivStart = grown(ivStart, ivCap);
      ivEnd = grown(ivEnd, ivCap);
      ivStartPosition = grown(ivStartPosition, ivCap);
    }
    const i = intervals++;
    ivPrev[i] = h;
    ivStart[i] = ivEnd[i] = at;
    ivStartPosition[i] = position;
    ivHead[n] = i;
  }

  function addRow(n: number, position: bigint, s: NodeState, status: number, spec: number): void {
    if (rows === rowCap) {
      rowCap *= 2;
      rowPosition = grown(rowPosition, rowCap);
      rowPrev = grown(rowPrev, rowCap);
      rowTime = grown(rowTime, rowCap);
      rowStatus = grown(rowStatus, rowCap);
      rowSpec = grown(rowSpec, rowCap);
      rowCounts = grown(rowCounts, rowCap * countsPerRow);
      rowLatency = grown(rowLatency, rowCap);
      rowLastLatency = grown(rowLastLatency, rowCap);
    }
    const p = rowHead[n]!;
    const r = rows++;
    rowPosition[r] = position;
    rowPrev[r] = p;
    rowTime[r] = nodeTime[n]!;
    rowStatus[r] = status;
    rowSpec[r] = spec;
    const c = r * countsPerRow;
    rowCounts[c] = s.anomalies.stale;
    rowCounts[c + 1] = s.anomalies.unknown;
    rowCounts[c + 2] = s.anomalies.undeclared;
    rowCounts[c + 3] = s.convergence.acknowledged;
    rowCounts[c + 4] = s.convergence.superseded;
    const acknowledged = s.convergence.acknowledged > (p >= 0 ? rowCounts[p * countsPerRow + 3]! : 0);
    rowLatency[r] = acknowledged && s.convergence.lastLatencyMs !== null ? s.convergence.lastLatencyMs : NaN;
    rowLastLatency[r] = !Number.isNaN(rowLatency[r]!) ? r : p >= 0 ? rowLastLatency[p]! : -1;
    rowHead[n] = r;
  }

  /** Does the node's new state differ from its newest row in anything the summary reads? */
  function changed(p: number, s: NodeState, status: number, spec: number): boolean {
    if (p < 0) return true;
    const c = p * countsPerRow;
    return (
      rowStatus[p] !== status ||
      rowSpec[p] !== spec ||
      rowCounts[c] !== s.anomalies.stale ||
      rowCounts[c + 1] !== s.anomalies.unknown ||
      rowCounts[c + 2] !== s.anomalies.undeclared ||
      rowCounts[c + 3] !== s.convergence.acknowledged ||
      rowCounts[c + 4] !== s.convergence.superseded
    );
  }

  function lastSampleAtOrBefore(position: bigint): number {
    let lo = 0;
    let hi = samples - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (samplePosition[mid]! <= position) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  /** The position of the last sample at or before a time: where the fleet stood then, to the second. */
  function lastSampleAtOrBeforeTime(time: number): bigint | null {
    let lo = 0;
    let hi = samples - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (sampleTime[mid]! <= time) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found < 0 ? null : samplePosition[found]!;
  }

  return {
    firstPosition: () => first,
    stats: () => ({
      rows,
      intervals,
      bytes: bytesOf([
        rowPosition,
        rowPrev,
        rowTime,
        rowStatus,
        rowSpec,
        rowCounts,
        rowLatency,
        rowLastLatency,
        ivPrev,
        ivStart,
        ivEnd,
        ivStartPosition,
        rowHead,
        ivHead,
        nodeTime,
        nodeSeen,
        samplePosition,
        sampleTime,
      ]),
    }),

    /** Called for every folded event, in position order, with the node's state after it. */
    record(node: string, e: Recorded, s: NodeState): void {
      const n = nodeIdx(node);
      const t = parseIso(eventTime(e));
      if (t > nodeTime[n]!) nodeTime[n] = t;
      first ??= e.position;
      head = e.position;
      if (s.lastSeenAt !== null) {
        const seen = parseIso(s.lastSeenAt);
        const before = nodeSeen[n]!;
        if (Number.isNaN(before) || seen > before) {
          nodeSeen[n] = seen;
          sight(n, seen, e.position);
        }
      }
      const status = statusCode.get(s.status)! | (s.caughtUp ? caughtUpBit : 0);
      const spec = s.sent === null ? -1 : specIdx(s.sent.specDigest);
      if (changed(rowHead[n]!, s, status, spec)) addRow(n, e.position, s, status, spec);
      if (t > maxTime) {
        if (samples === 0 || t - sampleTime[samples - 1]! >= sampleEveryMs) {
          if (samples === sampleCap) {
            sampleCap *= 2;
            samplePosition = grown(samplePosition, sampleCap);
            sampleTime = grown(sampleTime, sampleCap);
          }
          samplePosition[samples] = e.position;
          sampleTime[samples] = t;
          samples++;
        }
        maxTime = t;
      }
    },

    /** The fleet summary with each node as of `at`. */
    summarize(at: At, options: FleetSummaryOptions): FleetAsOf {
      const byPosition = at.kind === 'position';
      const p = byPosition ? at.position : 0n;
      const T = byPosition ? 0 : at.time;
      const asOf: bigint | null = byPosition ? (head === null || p < (first ?? 0n) ? null : p < head ? p : head) : null;
      let moment = byPosition ? NaN : T;
      if (byPosition) {
        const s = lastSampleAtOrBefore(p);
        if (s >= 0) moment = sampleTime[s]!;
      }

      const byStatus: Record<NodeStatus, number> = { undeclared: 0, behind: 0, refused: 0, degraded: 0, converged: 0 };
      const byLiveness: Record<LivenessState, number> = { connected: 0, disconnected: 0, 'never-seen': 0 };
      const cohorts = new Map<number, { nodes: number; caughtUp: number; byStatus: Record<NodeStatus, number> }>();
      const anomalies = { stale: 0, unknown: 0, undeclared: 0 };
      let acknowledged = 0;
      let superseded = 0;
      let count = 0;
      // The same histogram the live summary keeps (projections/fleet/latencyHistogram.ts), so "now" and "as of" read alike.
      const latencies = createLatencyHistogram();

      for (let n = 0; n < nodeIds.length; n++) {
        let r = rowHead[n]!;
        if (byPosition) while (r >= 0 && rowPosition[r]! > p) r = rowPrev[r]!;
        else while (r >= 0 && rowTime[r]! > T) r = rowPrev[r]!;
        if (r < 0) continue; // every node's first event leaves a row: no row, no node yet
        count++;
        const st = rowStatus[r]!;
        const status = statuses[st & 7]!;
        byStatus[status]++;

        let i = ivHead[n]!;
        if (byPosition) while (i >= 0 && ivStartPosition[i]! > p) i = ivPrev[i]!;
        else while (i >= 0 && ivStart[i]! > T) i = ivPrev[i]!;
        let liveness: LivenessState = 'never-seen';
        if (i >= 0) {
          // After the interval its end is the last sighting. Inside it the last sighting is at most graceMs old by
          // construction, and so is the end or the end lies ahead: connected either way.
          liveness = moment - ivEnd[i]! <= graceMs ? 'connected' : 'disconnected';
        }
        byLiveness[liveness]++;

        const spec = rowSpec[r]!;
        if (spec >= 0) {
          let cohort = cohorts.get(spec);
          if (cohort === undefined) {
            cohort = { nodes: 0, caughtUp: 0, byStatus: { undeclared: 0, behind: 0, refused: 0, degraded: 0, converged: 0 } };
            cohorts.set(spec, cohort);
          }
          cohort.nodes++;
          if ((st & caughtUpBit) !== 0) cohort.caughtUp++;
          cohort.byStatus[status]++;
        }
        const c = r * countsPerRow;
        anomalies.stale += rowCounts[c]!;
        anomalies.unknown += rowCounts[c + 1]!;
        anomalies.undeclared += rowCounts[c + 2]!;
        acknowledged += rowCounts[c + 3]!;
        superseded += rowCounts[c + 4]!;
        // The node's most recent latencies, as its state keeps them (projections/node/nodeState.ts).
        let l = rowLastLatency[r]!;
        for (let k = 0; k < recentLatencyLimit && l >= 0; k++) {
          latencies.add(rowLatency[l]!);
          const q = rowPrev[l]!;
          l = q >= 0 ? rowLastLatency[q]! : -1;
        }
      }
      const position = byPosition ? asOf : lastSampleAtOrBeforeTime(T);
      return {
        // The live summary's own summarising (projections/fleet/fleetTally.ts), so "now" and "as of" read alike.
        ...summarizeCounts(
          {
            nodes: count,
            byStatus,
            byLiveness,
            cohorts: [...cohorts].map(([spec, v]) => ({ spec: specIds[spec]!, ...v })),
            latencies,
            superseded,
            acknowledged,
            anomalies,
          },
          options,
        ),
        position: position === null ? null : position.toString(),
        moment: Number.isNaN(moment) ? null : new Date(moment).toISOString(),
      };
    },
  };
}

type Log = ReturnType<typeof createLog>;

export type FleetHistoryOptions = Readonly<{ store: EventStore; readModel: ReadModel; graceMs?: number }>;

/** Start recording as the read model folds: create it before the projections start, so a cold start records everything once. */
export function createFleetHistory({ store, readModel, graceMs = defaultGraceMs }: FleetHistoryOptions): FleetHistory {
  let log: Log = createLog(graceMs);
  let complete: boolean | null = null;
  let rebuilding: Promise<void> | null = null;
  let buffer: NodeChange[] | null = null;

  /** Moves when the read model folded events this history did not hear (a bulk catch-up): it is not complete then. */
  let gaps = 0;
  const stop = readModel.onChange(
    (c) => {
      if (buffer !== null) buffer.push(c);
      else log.record(c.node, c.event, c.state);
    },
    {
      // A cold start's bulk catch-up publishes states without a change per event: as after a
      // snapshot restore, the history is folded from the store when first asked.
      bulk: () => {
        gaps++;
        complete = false;
        log = createLog(graceMs);
      },
    },
  );

  /** Does the history start at the store's first event? Once it does, it always will. */
  async function checkComplete(): Promise<boolean> {
    if (complete === true) return true;
    let first: bigint | null = null;
    for await (const batch of store.readAll({ streamPrefix: 'node-', limit: 1 })) {
      first = batch[0]?.position ?? null;
      break;
    }
    complete = first === null || log.firstPosition() === first;
    return complete;
  }

  /** Fold the store from zero up to the read model's position into a new history, then follow the read model again. */
  async function rebuild(): Promise<void> {
    const gapsBefore = gaps;
    const pending: NodeChange[] = [];
    buffer = pending;
    try {
      const upTo = readModel.position();
      const next = createLog(graceMs);
      const states = new Map<string, NodeState>();
      if (upTo !== null) {
        outer: for await (const batch of store.readAll({ streamPrefix: 'node-' })) {
          for (const e of batch) {
            if (e.position > upTo) break outer;
            if (!isNodeEvent(e)) continue;
            const node = nodeOfStream(e.stream) ?? e.data.node;
            const s = foldNode(states.get(node) ?? initialNodeState(node), e);
            states.set(node, s);
            next.record(node, e, s);
          }
        }
      }
      for (const c of pending) if (upTo === null || c.position > upTo) next.record(c.node, c.event, c.state);
      log = next;
      // A bulk catch-up published meanwhile: what it folded past `upTo` was never heard; ask again.
      complete = gaps === gapsBefore;
    } finally {
      buffer = null;
    }
  }

  return {
    async at(at, options = {}) {
      if (!(await checkComplete())) {
        rebuilding ??= rebuild().finally(() => (rebuilding = null));
        await rebuilding;
      }
      return log.summarize(at, options);
    },
    stats: () => ({ ...log.stats(), complete }),
    stop,
  };
}
