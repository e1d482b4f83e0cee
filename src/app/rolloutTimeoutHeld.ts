import type { HeldTimeout } from '../engine/rolloutDriver.ts';
import type { RolloutChangeListener, RolloutSummary, RolloutView, TimeoutHeld } from '../readModel/rollouts.ts';
import { isoOrNull } from '../readModel/rolloutSummary.ts';

// The rollout view the API serves, with the driver's held timeouts on the open wave or the
// rollback (docs/design.md §8 "Timeouts while not observed"): the record says a wave is past its
// timeout, and only the driver knows it waits because no report can arrive.

export type RolloutViewWithHolds = Readonly<{
  view: RolloutView;
  /** The driver began, ended or moved a hold of this rollout's: its summary is sent again to streams. */
  changed: (rollout: string) => void;
}>;

const shown = (h: HeldTimeout): TimeoutHeld => ({
  since: isoOrNull(h.sinceMs) ?? new Date(0).toISOString(),
  until: h.untilMs === null ? null : isoOrNull(h.untilMs),
  reason: h.untilMs === null ? 'notObserving' : 'grace',
  graceMs: h.graceMs,
});

/**
 * `heldOf` is the driver's answer (undefined while this engine does not drive: the field is then
 * left out, since nothing here knows). Only a running rollout's open wave, or an unfinished
 * rollback, carries it: null when not held.
 */
export function withTimeoutHolds(view: RolloutView, heldOf: (rollout: string) => HeldTimeout | null | undefined): RolloutViewWithHolds {
  const listeners = new Set<RolloutChangeListener>();
  const summary = (id: string, now: number): RolloutSummary | undefined => {
    const r = view.summary(id, now);
    const held = r === undefined ? undefined : heldOf(id);
    if (r === undefined || held === undefined) return r;
    const waves = r.waves.map((w) =>
      r.status === 'running' && w.wave === r.current && w.completedAt === null
        ? { ...w, timeoutHeld: held !== null && held.wave === w.wave ? shown(held) : null }
        : w,
    );
    const rb = r.rollback;
    const rollback =
      rb === null || rb.completedAt !== null || r.status !== 'rollingBack'
        ? rb
        : { ...rb, timeoutHeld: held !== null && held.wave === null ? shown(held) : null };
    return { ...r, waves, rollback };
  };
  const changed = (rollout: string): void => {
    const r = view.summary(rollout, Date.now());
    if (r === undefined) return;
    for (const l of listeners) l({ rollout, position: BigInt(r.position) });
  };
  const onChange = (listener: RolloutChangeListener): (() => void) => {
    const stop = view.onChange(listener);
    listeners.add(listener);
    return () => {
      stop();
      listeners.delete(listener);
    };
  };
  return { view: { ...view, summary, onChange }, changed };
}
