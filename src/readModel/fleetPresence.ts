import type { LivenessState } from '../../projections/index.ts';
import { grown } from './typedColumns.ts';
import type { Column } from './typedColumns.ts';

// The presence half of the fleet's history (fleetHistory.ts says what is kept and why): per node,
// intervals of consecutive sightings at most graceMs apart (a longer silence starts a new one),
// extended or closed by the recorded transitions, and the liveness they give as of a moment.
// Nodes are the count log's indexes (fleetCountLog.ts); it calls `addNodes` as it numbers more.

export class FleetPresence {
  private cap = 1024;
  private count = 0;
  private prev = new Int32Array(this.cap);
  private start = new Float64Array(this.cap);
  private end = new Float64Array(this.cap);
  /**
   * How long after its end an interval still counts as connected: the reader's grace for
   * sightings (AliveSeen, reports), Infinity once a NodeHeard opened it, and up to when the engine
   * observed the silence once a NodeSilent closed it (docs/design.md §3 "Liveness as recorded").
   */
  private grace = new Float64Array(this.cap);
  private startPosition = new BigInt64Array(this.cap);

  // Per node: newest interval, latest sighting.
  private nodeCap = 1024;
  private head = new Int32Array(this.nodeCap).fill(-1);
  private seen = new Float64Array(this.nodeCap).fill(NaN);

  constructor(private readonly graceMs: number) {}

  intervals(): number {
    return this.count;
  }

  columns(): Column[] {
    return [this.prev, this.start, this.end, this.grace, this.startPosition, this.head, this.seen];
  }

  /** Room for nodes up to `nodeCap` (exclusive). */
  addNodes(nodeCap: number): void {
    if (nodeCap <= this.nodeCap) return;
    this.nodeCap = nodeCap;
    this.head = grown(this.head, nodeCap, -1);
    this.seen = grown(this.seen, nodeCap, NaN);
  }

  /** The node's last-seen time as its state says after an event: a later one is a sighting. */
  lastSeen(n: number, at: number, position: bigint): void {
    const before = this.seen[n]!;
    if (Number.isNaN(before) || at > before) {
      this.seen[n] = at;
      this.sight(n, at, position);
    }
  }

  /**
   * A recorded transition: the node heard at `at` (grace Infinity: connected until a NodeSilent
   * says otherwise), or silent since `at` (grace: until the engine observed it). Extends the
   * newest interval when the node was still connected by it, else starts one.
   */
  transition(n: number, at: number, grace: number, position: bigint): void {
    const h = this.head[n]!;
    if (h < 0 || at - this.end[h]! > this.grace[h]!) this.sight(n, at, position);
    const i = this.head[n]!;
    if (at > this.end[i]!) this.end[i] = at;
    this.grace[i] = grace;
    if (at > this.seen[n]! || Number.isNaN(this.seen[n]!)) this.seen[n] = at;
  }

  /** The node's liveness at `moment`, from its newest interval that started at or before position p (or time T). */
  livenessOf(n: number, byPosition: boolean, p: bigint, T: number, moment: number): LivenessState {
    let i = this.head[n]!;
    if (byPosition) while (i >= 0 && this.startPosition[i]! > p) i = this.prev[i]!;
    else while (i >= 0 && this.start[i]! > T) i = this.prev[i]!;
    if (i < 0) return 'never-seen';
    // After the interval its end is the last sighting. Inside it the last sighting is at most graceMs old by
    // construction, and so is the end or the end lies ahead: connected either way.
    return moment - this.end[i]! <= this.grace[i]! ? 'connected' : 'disconnected';
  }

  private sight(n: number, at: number, position: bigint): void {
    const h = this.head[n]!;
    if (h >= 0 && at - this.end[h]! <= this.grace[h]!) {
      if (at > this.end[h]!) this.end[h] = at;
      return;
    }
    if (this.count === this.cap) {
      this.cap *= 2;
      this.prev = grown(this.prev, this.cap);
      this.start = grown(this.start, this.cap);
      this.end = grown(this.end, this.cap);
      this.grace = grown(this.grace, this.cap);
      this.startPosition = grown(this.startPosition, this.cap);
    }
    const i = this.count++;
    this.prev[i] = h;
    this.start[i] = this.end[i] = at;
    this.grace[i] = this.graceMs;
    this.startPosition[i] = position;
    this.head[n] = i;
  }
}
