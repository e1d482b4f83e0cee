import { isOperatorSkip, lateOf, waveProgress } from '../core/rollout/index.ts';
import { listLimit } from '../core/events/index.ts';
import type { NodeFacts, RolloutState, WaveProgress } from '../core/rollout/index.ts';
import type { Recorded, RolloutEvent } from '../core/events/index.ts';

// How the open wave stands when the read side's view has not folded the driver's latest sends
// yet: the view's counts as folded, plus the driver's own RolloutSent events since. Right after
// each batch the driver reads back the RolloutSent it appended, a turn before the projections
// fold it; counting the wave from scratch then (waveProgress, a walk over every node of the wave)
// made a wave of n nodes sent in batches of b cost n²/b node lookups: 5 million for 50,000.
//
// A wave the driver opened in the gap starts from nothing: the view counts a wave's nodes from
// the RolloutSent events that list them, which come after its WaveStarted. Recounting it from
// scratch until the view folded the WaveStarted cost a walk of the whole wave per batch.
//
// A node listed by a RolloutSent the view has not folded is pending: the read model folds the
// declaration with the RolloutSent that lists it (one append) and the node's report after it, so
// it holds no report of that declaration and no later send yet (nodeOutcome: 'pending'). Anything
// else in the gap (a refused send whose failure is listed in wave order, events
// missing from the driver's log) answers undefined: the caller counts from scratch.

/** What the view has folded of a rollout (src/readModel/rollouts.ts progressFolded). */
export type ProgressFolded = Readonly<{
  revision: bigint;
  current: number;
  progress: WaveProgress | null;
  tracks: (node: string) => boolean;
}>;

export function progressAhead(
  s: RolloutState,
  wave: number,
  folded: ProgressFolded,
  /** The rollout events the driver read after some revision, in order. */
  log: readonly Recorded<RolloutEvent>[],
  nodeOf: (node: string) => NodeFacts | undefined,
  graceMs: number,
  limit: number,
): WaveProgress | undefined {
  if (folded.revision >= s.revision) return undefined;
  const folds = folded.progress;
  /** The view's counts of the wave, or null until the gap opens it (then they start from nothing). */
  let base: WaveProgress | null = folds !== null && folds.wave === wave && folded.current === s.current ? folds : null;
  const sent: string[] = [];
  const seen = new Set<string>();
  let skipped = 0;
  let expect = folded.revision + 1n;
  for (const e of log) {
    if (e.revision <= folded.revision) continue;
    if (e.revision !== expect) return undefined;
    expect++;
    if (base === null) {
      // Before the wave opens, what closes the one before it: nothing the view counts of this wave.
      if (e.type === 'WaveStarted' && e.data.wave === wave) {
        base = unopened(s, wave);
        if (base === null) return undefined;
      } else if (!(e.type === 'WaveCompleted' || e.type === 'WaveGateChecked' || e.type === 'RolloutSent') || e.data.wave >= wave)
        return undefined;
      continue;
    }
    if (e.type !== 'RolloutSent' || e.data.wave !== wave) return undefined;
    for (const x of e.data.sends) {
      if (seen.has(x.node) || folded.tracks(x.node)) continue;
      seen.add(x.node);
      sent.push(x.node);
    }
    for (const x of e.data.skipped) {
      if (seen.has(x.node) || folded.tracks(x.node)) continue;
      if (!isOperatorSkip(x.code)) return undefined;
      seen.add(x.node);
      skipped++;
    }
  }
  if (expect !== s.revision + 1n || base === null) return undefined;
  const v = base;
  return {
    wave,
    get unsent() {
      return v.unsent;
    },
    unsentCount: Math.max(0, v.unsentCount - sent.length - skipped),
    pending: v.pending + sent.length,
    done: v.done,
    superseded: v.superseded,
    skipped: v.skipped + skipped,
    get failures() {
      return v.failures;
    },
    failureCount: v.failureCount,
    failuresByClass: v.failuresByClass,
    late: (nowMs) => {
      const a = v.late(nowMs);
      const b = lateOf(sent, nodeOf, nowMs, graceMs, limit);
      return { failures: [...a.failures, ...b.failures].slice(0, limit), timeout: a.timeout + b.timeout, silent: a.silent + b.silent };
    },
    supersededNodes: () => v.supersededNodes(),
  };
}

/**
 * The counts of a wave the view has not seen open: every target unsent, nothing else. The view
 * tracks a wave's nodes from the RolloutSent events of that wave, which follow its WaveStarted.
 */
function unopened(s: RolloutState, wave: number): WaveProgress | null {
  const w = s.waves[wave - 1];
  if (w === undefined || w.startedAt === null) return null;
  // Targets are listed in order, so those of the wave listed so far are a prefix of it.
  const unsentCount = Math.max(0, Math.min(w.to, s.targets.length) - w.from);
  return {
    wave,
    unsent: [], // the driver's cursor lists them (withUnsent)
    unsentCount,
    pending: 0,
    done: 0,
    superseded: 0,
    skipped: 0,
    failures: [],
    failureCount: 0,
    failuresByClass: { refused: 0, degraded: 0, unsendable: 0 },
    late: () => ({ failures: [], timeout: 0, silent: 0 }),
    supersededNodes: () => [],
  };
}

/** Where the scan for a wave's unsent nodes starts: every target before `index` was sent or skipped. */
export type UnsentCursor = { wave: number; index: number };

/**
 * The first `limit` nodes of the open wave the rollout has neither sent to nor skipped, in wave
 * order, from the driver's own fold: the same list as the view's (and waveProgress's) at the same
 * revision. A rollout's sends only grow, so the scan resumes where the last one found the first
 * unsent node, and a wave's sends cost its size once, not once per batch.
 */
export function unsentOf(s: RolloutState, wave: number, cursor: UnsentCursor, limit: number): string[] {
  const w = s.waves[wave - 1];
  if (w === undefined) return [];
  if (cursor.wave !== wave || cursor.index < w.from) {
    cursor.wave = wave;
    cursor.index = w.from;
  }
  const taken = (node: string | undefined): boolean => node === undefined || s.sends.has(node) || s.skipped.has(node);
  while (cursor.index < w.to && taken(s.targets[cursor.index])) cursor.index++;
  const out: string[] = [];
  for (let i = cursor.index; i < w.to && out.length < limit; i++) {
    const node = s.targets[i];
    if (!taken(node)) out.push(node!);
  }
  return out;
}

/** `p` with its unsent list from `unsentOf` (its other lists stay as lazy as they were). */
export function withUnsent(p: WaveProgress, unsent: () => readonly string[]): WaveProgress {
  let list: readonly string[] | null = null;
  return {
    wave: p.wave,
    get unsent() {
      list ??= p.unsentCount === 0 ? [] : unsent();
      return list;
    },
    unsentCount: p.unsentCount,
    pending: p.pending,
    done: p.done,
    superseded: p.superseded,
    skipped: p.skipped,
    get failures() {
      return p.failures;
    },
    failureCount: p.failureCount,
    failuresByClass: p.failuresByClass,
    late: (nowMs) => p.late(nowMs),
    supersededNodes: () => p.supersededNodes(),
  };
}

/** What the driver keeps per rollout for this: the events read while the view lagged, and the cursor. */
export type DrivenLog = { log: Recorded<RolloutEvent>[]; cursor: UnsentCursor };

export type OpenWaveDeps = Readonly<{
  nodeOf: (node: string) => NodeFacts | undefined;
  progress?: ((s: RolloutState, wave: number) => WaveProgress | null | undefined) | undefined;
  progressFolded?: ((rollout: string) => ProgressFolded | undefined) | undefined;
  graceMs: number;
}>;

/**
 * How the driver sees the open wave: the read side's counts (as folded to `s`, or as folded so
 * far plus the driver's sends since) with the unsent list from the driver's cursor; counted from
 * scratch over the wave only when neither applies (a restart, a wave just opened).
 */
export function openWaveProgress(deps: OpenWaveDeps, driven: DrivenLog | undefined, s: RolloutState, wave: number): WaveProgress | null {
  const cursor = driven?.cursor ?? { wave, index: 0 };
  const unsent = (): string[] => unsentOf(s, wave, cursor, listLimit);
  const counted = deps.progress?.(s, wave);
  if (counted === null) return null;
  if (counted !== undefined) return withUnsent(counted, unsent);
  const folded = driven === undefined ? undefined : deps.progressFolded?.(s.id);
  if (folded !== undefined) {
    driven!.log = driven!.log.filter((e) => e.revision > folded.revision);
    const ahead = progressAhead(s, wave, folded, driven!.log, deps.nodeOf, deps.graceMs, listLimit);
    if (ahead !== undefined) return withUnsent(ahead, unsent);
  }
  return waveProgress(s, wave, deps.nodeOf, listLimit, deps.graceMs);
}
