import type { Recorded, RolloutEvent } from '../src/core/events/index.ts';
import type { RollbackSend, RollbackState, RolloutState } from '../src/core/rollout/index.ts';

// A rollout's rollback, folded from the same stream (docs/design.md §8, "Rollback"): RollbackStarted
// ends the waves, RollbackSent records the previous declarations sent again (and the nodes not
// sent one), RollbackCompleted ends it. A RollbackSent copies the maps it grows, once per event (a
// batch of up to 500 nodes), so an earlier state keeps showing what it showed.

type Changes = Partial<Pick<RolloutState, 'status' | 'rollback' | 'pausedAt' | 'updatedAt'>>;

/** The changes a rollback event makes to `s`; none for any other event, or one out of order. */
export function foldRollback(s: RolloutState, e: Recorded<RolloutEvent>): Changes {
  switch (e.type) {
    case 'RollbackStarted': {
      if (s.rollback !== null) return {};
      const rollback: RollbackState = { started: e.data, sends: new Map(), skipped: new Map(), lastSentAtMs: null, completed: null };
      return { status: 'rollingBack', rollback, pausedAt: null, updatedAt: e.data.at };
    }
    case 'RollbackSent': {
      const r = s.rollback;
      if (r === null) return {};
      const d = e.data;
      const sends = new Map(r.sends);
      for (const x of d.sends) {
        const wave = s.sends.get(x.node)?.wave ?? 0;
        sends.set(x.node, { wave, serial: x.serial, digest: x.digest, sentAt: d.sentAt, restores: x.restores } satisfies RollbackSend);
      }
      const skipped = new Map(r.skipped);
      for (const x of d.skipped) skipped.set(x.node, { code: x.code, reason: x.reason });
      return { rollback: { ...r, sends, skipped, lastSentAtMs: Date.parse(d.sentAt) }, updatedAt: d.sentAt };
    }
    case 'RollbackCompleted': {
      const r = s.rollback;
      if (r === null || r.completed !== null) return {};
      return { status: 'rolledBack', rollback: { ...r, completed: e.data }, updatedAt: e.data.at };
    }
    default:
      return {};
  }
}
