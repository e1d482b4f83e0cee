import {
  budgetUsed,
  isTerminal,
  rollbackDeadline,
  rollbackPolicy,
  rollbackProgress,
  supersededPolicy,
  waveDeadline,
} from '../core/rollout/index.ts';
import { criteriaNow } from './rolloutCriteria.ts';
import { zero } from './rolloutViewTypes.ts';
import type { Lookup, RollbackSummary, RolloutSummary, Tracked, WaveCounts } from './rolloutViewTypes.ts';

// A rollout's summary (GET /v1/rollouts/:id, `converge rollout status`): the plan, each wave's
// counts as the view keeps them, the budget or criteria, latency and an estimate of time to go.

/** A time as ISO 8601, or null past the Date range (a plan stored before plans were bounded). */
export const isoOrNull = (ms: number | null): string | null =>
  ms === null || !(Math.abs(ms) <= 8.64e15) ? null : new Date(ms).toISOString();

export function waveCounts(r: Tracked): WaveCounts[] {
  return r.state.waves.map((w, i) => {
    const c = r.counts[i] ?? zero();
    const size = w.to - w.from;
    const failed = c.refused + c.degraded + c.unsendable;
    const settled = c.pending + c.done + failed + c.superseded + c.skipped;
    // A wave left open by a halt or an abort never times out: it has no deadline to show.
    const deadline = w.completed === null && !isTerminal(r.state.status) ? waveDeadline(r.state, w) : null;
    return {
      wave: w.wave,
      from: w.from,
      to: w.to,
      size,
      startedAt: w.startedAt,
      completedAt: w.completed?.completedAt ?? null,
      recorded: w.completed === null ? null : { done: w.completed.done, failed: w.completed.failed, superseded: w.completed.superseded },
      deadline: isoOrNull(deadline),
      unsent: Math.max(0, size - settled),
      pending: c.pending,
      done: c.done,
      refused: c.refused,
      degraded: c.degraded,
      unsendable: c.unsendable,
      failed,
      superseded: c.superseded,
      skipped: c.skipped,
    };
  });
}

/**
 * The rollback's counts over its targets, walked from the node fold's states on each call (a
 * rollback is rare and bounded by the nodes the rollout sent to; the waves' counts are kept).
 */
function rollbackSummary(r: Tracked, lookup: Lookup): RollbackSummary | null {
  const s = r.state;
  const rb = s.rollback;
  if (rb === null) return null;
  const p = rollbackProgress(s, lookup.nodeOf);
  const skipped = [...rb.skipped].slice(0, 1_000).map(([node, x]) => ({ node, code: x.code, reason: x.reason }));
  const ended = rb.completed;
  return {
    scope: rb.started.scope,
    wave: rb.started.wave,
    by: rb.started.by,
    reason: rb.started.reason,
    startedAt: rb.started.at,
    targets: p.targets,
    unsent: ended === null ? p.unsentCount : 0,
    pending: ended === null ? p.pending.length : 0,
    done: ended?.done ?? p.done,
    failed: ended?.failed ?? p.failureCount,
    skipped,
    skippedCount: rb.skipped.size,
    failures: ended?.failures ?? p.failures,
    deadline: ended === null && s.status === 'rollingBack' ? isoOrNull(rollbackDeadline(s)) : null,
    completedAt: ended?.at ?? null,
  };
}

export function summaryOf(r: Tracked, now: number, lookup: Lookup): RolloutSummary {
  const s = r.state;
  const waves = waveCounts(r);
  const totals = { unsent: 0, pending: 0, done: 0, failed: 0, superseded: 0 };
  for (const w of waves) {
    totals.unsent += w.unsent;
    totals.pending += w.pending;
    totals.done += w.done;
    totals.failed += w.failed;
    totals.superseded += w.superseded;
  }
  const open = s.current > 0 ? s.waves[s.current - 1] : undefined;
  const openWave = open !== undefined && open.completed === null ? waves[open.wave - 1] : undefined;
  const openFailed = openWave === undefined ? 0 : openWave.failed + (supersededPolicy(s) === 'fail' ? openWave.superseded : 0);
  const settled = totals.done + totals.failed + totals.superseded;
  const remaining = s.started.targets - settled;
  let etaMs: number | null = null;
  if (!isTerminal(s.status) && r.firstSentMs !== null && settled > 0 && now > r.firstSentMs) {
    const perNode = (now - r.firstSentMs) / settled;
    const pausesLeft = s.waves.filter((w) => w.startedAt === null).length * s.started.pauseMs;
    etaMs = Math.round(remaining * perNode + pausesLeft);
  } else if (isTerminal(s.status)) etaMs = null;
  return {
    rollout: s.id,
    status: s.status,
    specDigest: s.started.specDigest,
    asOf: s.started.asOf === undefined ? null : { at: s.started.asOf.at ?? null, position: s.started.asOf.position ?? null },
    selection: s.started.selection,
    targets: s.started.targets,
    asGiven: s.started.asGiven,
    maxFailures: s.started.maxFailures,
    criteria: criteriaNow(s, openWave),
    waveTimeoutMs: s.started.waveTimeoutMs,
    pauseMs: s.started.pauseMs,
    onSuperseded: supersededPolicy(s),
    startedBy: s.started.startedBy,
    startedAt: s.started.startedAt,
    updatedAt: s.updatedAt,
    current: s.current,
    waves,
    totals,
    // A halt records what it counted (the timeouts among them): the budget shows that, not a recount.
    budget: { used: s.halted?.failures ?? budgetUsed(s) + openFailed, max: s.started.maxFailures },
    convergence: { samples: r.latencies.count(), p50Ms: r.latencies.percentile(50), p99Ms: r.latencies.percentile(99) },
    eta: {
      remaining: isTerminal(s.status) ? 0 : remaining,
      ms: etaMs,
      at: etaMs === null ? null : isoOrNull(now + etaMs),
    },
    pausedAt: s.pausedAt,
    halted: s.halted === null ? null : { ...s.halted, why: s.halted.why ?? 'overBudget' },
    completed: s.completed,
    aborted: s.aborted,
    rollbackOnHalt: rollbackPolicy(s),
    // The gate's latest answer, `held` until it says yes for the next wave (docs/design.md §8 "Gates").
    gate:
      s.started.gate === undefined
        ? null
        : {
            ...s.started.gate,
            state: s.gate === null ? 'notAsked' : s.gate.passed ? 'open' : 'held',
            ...(s.gate === null ? {} : { wave: s.gate.wave, detail: s.gate.detail, attempts: s.gate.attempts, at: s.gate.at }),
          },
    rollback: rollbackSummary(r, lookup),
    position: r.position.toString(),
  };
}
