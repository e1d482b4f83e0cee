import type { RolloutSummary, TimeoutHeld } from '../../readModel/rollouts.ts';
import { describeSelection } from '../../readModel/rolloutExplain.ts';
import { pairs, short, table } from '../output.ts';

// How `converge rollout status` and `converge rollouts` print a rollout for people.

export const durationText = (ms: number): string => {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60 === 0 ? '' : `${s % 60}s`}`;
  return `${Math.floor(m / 60)}h${m % 60 === 0 ? '' : `${m % 60}m`}`;
};

const ofWaves = (r: RolloutSummary): string => (r.current === 0 ? 'no wave open yet' : `wave ${r.current} of ${r.waves.length}`);

/** A failed node as `rollout status` lists it: its wave (or `rollback`), its failure class, and why. */
export type FailedNode = Readonly<{ node: string; wave: string; class: string; detail: string }>;

/**
 * Why a timeout past due decides nothing yet (docs/design.md §8 "Timeouts while not observed"): only
 * a summary from the engine driving rollouts carries it; one folded from the store does not.
 */
const heldText = (whose: string, h: TimeoutHeld): string =>
  h.until === null
    ? `${whose} timeout held since ${h.since}: no report can arrive; decided ${durationText(h.graceMs)} after an engine observes again`
    : `${whose} timeout held until ${h.until}: observed again, reports queued meanwhile still arriving`;

/** `all by engine at …: 3 of 4 rolled back, 0 pending, 1 failed; 1 not sent (fresh noPrevious)`. */
function rollbackText(r: RolloutSummary): string {
  const b = r.rollback;
  if (b === null) return r.rollbackOnHalt === 'none' ? '-' : `none yet (on halt: ${r.rollbackOnHalt})`;
  const scope = b.scope === 'all' ? 'every node sent' : `wave ${b.wave}`;
  const state = b.completedAt !== null ? `completed ${b.completedAt}` : b.deadline === null ? 'sending' : `times out ${b.deadline}`;
  const skipped =
    b.skippedCount === 0
      ? ''
      : `; ${b.skippedCount} not sent (${b.skipped
          .slice(0, 5)
          .map((x) => `${x.node} ${x.code}`)
          .join(', ')}${b.skippedCount > 5 ? ', …' : ''})`;
  return `${scope}, by ${b.by} at ${b.startedAt}: ${b.done} of ${b.targets} rolled back, ${b.pending} pending, ${b.failed} failed${skipped}; ${state}`;
}

export function rolloutDetail(r: RolloutSummary, failing: readonly FailedNode[], now: number): string {
  const latency =
    r.convergence.samples === 0
      ? '-'
      : `p50 ${durationText(r.convergence.p50Ms ?? 0)}  p99 ${durationText(r.convergence.p99Ms ?? 0)}  (${r.convergence.samples} node(s))`;
  const eta =
    r.eta.ms === null
      ? r.status === 'running'
        ? 'not known yet'
        : '-'
      : `~${durationText(r.eta.ms)} (${r.eta.at ?? ''}), ${r.eta.remaining} node(s) to go`;
  const end =
    r.halted !== null
      ? r.halted.why === 'noneDone'
        ? `halted in wave ${r.halted.wave} at ${r.halted.at}: its nodes settled with none done (${r.halted.failures} failure(s), budget ${r.halted.maxFailures}); nothing more is sent — start a new rollout once fixed`
        : r.halted.criterion !== undefined
          ? `halted in wave ${r.halted.wave} at ${r.halted.at}: criterion ${r.halted.criterion.asGiven} tripped, ${r.halted.criterion.failures} failure(s) over the ${r.halted.criterion.allowed} it allowed of ${r.halted.criterion.settled} settled; nothing more is sent — start a new rollout once fixed`
          : `halted in wave ${r.halted.wave} at ${r.halted.at}: ${r.halted.failures} failure(s) over the budget of ${r.halted.maxFailures}; nothing more is sent — start a new rollout once fixed`
      : r.aborted !== null
        ? `aborted at ${r.aborted.at} by ${r.aborted.by}${r.aborted.reason === '' ? '' : `: ${r.aborted.reason}`}`
        : r.completed !== null
          ? `completed at ${r.completed.at}: ${r.completed.done} done, ${r.completed.failed} failed, ${r.completed.superseded} superseded`
          : r.pausedAt !== null
            ? `paused since ${r.pausedAt}`
            : '-';
  const head = pairs([
    ['rollout', `${r.rollout}  ${r.status}  (${ofWaves(r)})`],
    [
      'spec',
      r.asOf === null
        ? `${short(r.specDigest)} to ${r.targets} node(s): ${describeSelection(r.selection)}`
        : `each node's own as of ${r.asOf.at ?? `position ${r.asOf.position ?? ''}`}, to ${r.targets} node(s): ${describeSelection(r.selection)}`,
    ],
    [
      'plan',
      `waves ${r.asGiven.waves} = ${r.waves.map((w) => w.to).join(', ')}; ${r.asGiven.abortOn === undefined ? `failures allowed ${r.maxFailures} (${r.asGiven.maxFailures})` : `abort on ${r.asGiven.abortOn}`}; wave timeout ${durationText(r.waveTimeoutMs)}${r.pauseMs > 0 ? `; pause ${durationText(r.pauseMs)}` : ''}`,
    ],
    ['started', `${r.startedAt} by ${r.startedBy}`],
    r.asGiven.abortOn === undefined
      ? ['budget', `${r.budget.used} of ${r.budget.max} failure(s) used`]
      : ['criteria', r.criteria.map(criterionText).join('; ')],
    ['latency', latency],
    ['eta', eta],
    ['end', end],
    ['rollback', rollbackText(r)],
    ...r.waves.flatMap((w) => (w.timeoutHeld == null ? [] : [['held', heldText(`wave ${w.wave}'s`, w.timeoutHeld)] as const])),
    ...(r.rollback?.timeoutHeld == null ? [] : [['held', heldText("the rollback's", r.rollback.timeoutHeld)] as const]),
    ...(r.gate === null
      ? []
      : [
          [
            'gate',
            `${r.gate.url} (${r.gate.timeoutMs} ms): ${r.gate.state === 'held' ? `holding wave ${r.gate.wave}: ${r.gate.detail} (${r.gate.attempts} call(s))` : r.gate.state === 'open' ? `opened wave ${r.gate.wave}` : 'not asked yet'}`,
          ] as const,
        ]),
  ]);
  const rows = r.waves.map((w) => [
    String(w.wave),
    String(w.size),
    String(w.done),
    String(w.pending),
    String(w.failed),
    String(w.superseded),
    String(w.unsent),
    w.completedAt !== null
      ? `completed ${w.completedAt}${w.recorded === null ? '' : ` (then ${w.recorded.done} done, ${w.recorded.failed} failed, ${w.recorded.superseded} superseded)`}`
      : w.startedAt === null
        ? 'waiting'
        : r.status === 'halted' || r.status === 'aborted' || r.status === 'rollingBack' || r.status === 'rolledBack'
          ? `${r.status}, open`
          : w.deadline === null
            ? 'sending'
            : Date.parse(w.deadline) <= now
              ? `open, past its timeout (${w.deadline})${w.timeoutHeld == null ? '' : ', held'}`
              : `open, times out ${w.deadline}`,
  ]);
  const waves = table(['WAVE', 'NODES', 'DONE', 'PENDING', 'FAILED', 'SUPERSEDED', 'UNSENT', 'STATE'], rows);
  const failures =
    failing.length === 0
      ? ''
      : `\n${table(
          ['NODE', 'WAVE', 'CLASS', 'DETAIL'],
          failing.map((n) => [n.node, n.wave, n.class, n.detail]),
        )}`;
  return `${head}\n${waves}${failures}`;
}

export const rolloutHeaders = ['ROLLOUT', 'STATUS', 'WAVE', 'DONE', 'PENDING', 'FAILED', 'SUPERSEDED', 'TARGETS', 'STARTED', 'BY'];
export const rolloutRow = (r: RolloutSummary): string[] => [
  r.rollout,
  r.status,
  `${r.current}/${r.waves.length}`,
  String(r.totals.done),
  String(r.totals.pending),
  String(r.totals.failed),
  String(r.totals.superseded),
  String(r.targets),
  r.startedAt,
  r.startedBy,
];

/** `refused+degraded:10%@5 1 failure(s), allows 0 of 3 settled` or `… (waits for 5 settled)`. */
const criterionText = (c: RolloutSummary['criteria'][number]): string =>
  `${c.asGiven} ${c.failures} failure(s), ${c.allowed === null ? `waits for ${c.minSettled} settled (${c.settled} now)` : `allows ${c.allowed} of ${c.settled} settled`}`;
