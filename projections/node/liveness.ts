// docs/design.md §3: liveness is separate from convergence and depends on time, so it is computed at
// read time from the last sign of life, a grace period and a supplied "now" — never folded.

/**
 * docs/design.md §3's liveness states, as a list: the API's schemas and the CLI's filters are built from it.
 * `not-observed`: as of a moment no engine was observing (stopped, crashed, cut off from the
 * broker), so the record cannot say either way (recordedLiveness.ts).
 */
export const livenessStates = ['connected', 'disconnected', 'never-seen', 'not-observed'] as const;
export type LivenessState = (typeof livenessStates)[number];

export type Liveness = Readonly<{
  state: LivenessState;
  lastSeenAt: string | null;
  /** Time since the last sign of life when disconnected; 0 otherwise. */
  disconnectedForMs: number;
  /** Not-observed in an engine's current view: why that engine cannot say (it runs no ingest and no engine observes). */
  reason?: string;
}>;

export const defaultGraceMs = 60_000;

export function livenessAt(lastSeenAt: string | null, now: Date | number, graceMs: number = defaultGraceMs): Liveness {
  if (lastSeenAt === null) return { state: 'never-seen', lastSeenAt: null, disconnectedForMs: 0 };
  const silentFor = (typeof now === 'number' ? now : now.getTime()) - Date.parse(lastSeenAt);
  return silentFor > graceMs
    ? { state: 'disconnected', lastSeenAt, disconnectedForMs: silentFor }
    : { state: 'connected', lastSeenAt, disconnectedForMs: 0 };
}

/**
 * The newer of the folded last-seen time and an exact one held elsewhere (the ingest keeps it in
 * memory because AliveSeen is coalesced in the store, docs/design.md §2). The API and the node gauges
 * both read liveness through this, so they cannot disagree.
 */
export function newerLastSeen(folded: string | null, exact: Date | string | null | undefined): string | null {
  if (exact === null || exact === undefined) return folded;
  const iso = typeof exact === 'string' ? exact : exact.toISOString();
  return folded === null || Date.parse(iso) > Date.parse(folded) ? iso : folded;
}
