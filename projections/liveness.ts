// DESIGN §3: liveness is separate from convergence and depends on time, so it is computed at
// read time from the last sign of life, a grace period and a supplied "now" — never folded.

export type LivenessState = 'connected' | 'disconnected' | 'never-seen';

export type Liveness = Readonly<{
  state: LivenessState;
  lastSeenAt: string | null;
  /** Time since the last sign of life when disconnected; 0 otherwise. */
  disconnectedForMs: number;
}>;

export const defaultGraceMs = 60_000;

export function livenessAt(lastSeenAt: string | null, now: Date | number, graceMs: number = defaultGraceMs): Liveness {
  if (lastSeenAt === null) return { state: 'never-seen', lastSeenAt: null, disconnectedForMs: 0 };
  const silentFor = (typeof now === 'number' ? now : now.getTime()) - Date.parse(lastSeenAt);
  return silentFor > graceMs
    ? { state: 'disconnected', lastSeenAt, disconnectedForMs: silentFor }
    : { state: 'connected', lastSeenAt, disconnectedForMs: 0 };
}
