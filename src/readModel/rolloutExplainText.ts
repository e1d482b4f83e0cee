import { isOperatorSkip } from '../core/rollout/index.ts';
import type { RolloutState } from '../core/rollout/index.ts';
import type { ExplainEntry } from './rolloutExplain.ts';

// How `converge rollout explain` says each entry of a rollout's story (rolloutExplain.ts) for people.

const short = (d: string | null): string => (d === null ? '(none)' : d.slice(0, 12));
const ms = (n: number): string => (n % 60_000 === 0 ? `${n / 60_000}m` : n % 1000 === 0 ? `${n / 1000}s` : `${n} ms`);

/** One line for people per entry, in store order. */
export function explainLine(e: ExplainEntry): string {
  const when = e.at;
  switch (e.kind) {
    case 'started':
      return `${when}  started by ${e.startedBy}: ${e.asOf === undefined ? `spec ${short(e.specDigest)}` : `each node's own spec as of ${e.asOf.at ?? `position ${e.asOf.position ?? ''}`} (history up to position ${e.asOf.upTo})`} to ${e.targets} node(s) (${describeSelection(e.selection)}), waves ${e.asGiven.waves} = ${e.waves.join(', ')} cumulative, ${e.asGiven.abortOn === undefined ? `failures allowed ${e.maxFailures} (${e.asGiven.maxFailures})` : `abort on ${e.asGiven.abortOn}`}, wave timeout ${ms(e.waveTimeoutMs)}${e.pauseMs > 0 ? `, pause ${ms(e.pauseMs)} between waves` : ''}`;
    case 'waveOpened': {
      const nodes = e.to - e.from === 1 ? `1 node, target ${e.to}` : `${e.to - e.from} nodes, targets ${e.from + 1}–${e.to}`;
      if (e.because === null) return `${when}  wave ${e.wave} opened (${nodes}): the first wave`;
      const b = e.because;
      const rest = [b.failed > 0 ? `${b.failed} failed within the budget` : '', b.superseded > 0 ? `${b.superseded} superseded` : '']
        .filter((x) => x !== '')
        .join(', ');
      const last =
        b.last === null ? '' : `; the last, ${b.last.node}, reported ${short(b.last.digest)} at ${b.last.at} (position ${b.last.position})`;
      return `${when}  wave ${e.wave} opened (${nodes}) because ${b.done} of ${b.size} node(s) of wave ${b.wave} reported the digest this rollout sent them${rest === '' ? '' : ` (${rest})`}${last}`;
    }
    case 'sent': {
      // Held and pinned nodes are the operator's skips (no failure); any other code is a refused send.
      const skipped = e.skipped.filter((x) => isOperatorSkip(x.code));
      const refused = e.skipped.filter((x) => !isOperatorSkip(x.code));
      const list = (xs: typeof e.skipped): string => xs.map((x) => `${x.node}: ${x.code}`).join(', ');
      return `${when}  wave ${e.wave}: ${e.sends} declaration(s) sent${refused.length > 0 ? `, ${refused.length} not sendable (${list(refused)})` : ''}${skipped.length > 0 ? `, ${skipped.length} skipped, counted against no budget (${skipped.map((x) => `${x.node}: ${x.reason}`).join('; ')})` : ''}`;
    }
    case 'nodeDone':
      return `${when}  wave ${e.wave}: ${e.node} done: its report names ${short(e.digest)} (serial ${e.serial}, position ${e.position})${e.latencyMs === null ? '' : `, ${e.latencyMs} ms after the send`}`;
    case 'nodeFailed':
      // failureDetail names a refusal itself ("refused: …"); the other outcomes are named here.
      return `${when}  wave ${e.wave}: ${e.node} ${e.detail.startsWith(`${e.outcome}:`) ? e.detail : `${e.outcome}: ${e.detail}`}`;
    case 'nodeSuperseded':
      return `${when}  wave ${e.wave}: ${e.node} superseded: serial ${e.by.serial} (${short(e.by.digest)}) was sent from elsewhere before it read ours`;
    case 'staleReport':
      return `${when}  wave ${e.wave}: ${e.node} stale report (position ${e.position}): names ${e.reportedSerial === null ? '' : `serial ${e.reportedSerial} `}${short(e.reported)}, not ours, serial ${e.oursSerial} ${short(e.ours)} sent at ${e.sentAt}; the clock rule would have counted it done, the digest rule keeps it pending`;
    case 'waveCompleted':
      return `${when}  wave ${e.wave} completed: ${e.done} done, ${e.failed} failed, ${e.superseded} superseded${e.failures.length > 0 ? ` (${e.failures.map((f) => `${f.node} ${f.reason}`).join(', ')})` : ''}`;
    case 'gate':
      return e.passed
        ? `${when}  wave ${e.wave}: the gate answered ${e.detail}: the wave may open (call ${e.attempt})`
        : `${when}  wave ${e.wave} held at the gate: ${e.detail} (call ${e.attempt}; asked again with backoff)`;
    case 'paused':
      return `${when}  paused by ${e.by}${e.reason === '' ? '' : `: ${e.reason}`}`;
    case 'resumed':
      return `${when}  resumed by ${e.by}`;
    case 'halted':
      return `${when}  halted in wave ${e.wave}: ${haltWhy(e)} (${e.failed.map((f) => `${f.node} ${f.detail.startsWith(`${f.reason}:`) ? f.detail : `${f.reason}: ${f.detail}`}`).join('; ')})`;
    case 'completed':
      return `${when}  completed: ${e.done} done, ${e.failed} failed, ${e.superseded} superseded`;
    case 'aborted':
      return `${when}  aborted by ${e.by}${e.reason === '' ? '' : `: ${e.reason}`}`;
    case 'rollbackStarted':
      return `${when}  rollback began (${e.scope === 'all' ? 'every node sent' : `wave ${e.wave}'s nodes`}) by ${e.by}${e.reason === '' ? '' : `: ${e.reason}`}`;
    case 'rollbackSent':
      return `${when}  rollback: ${e.sends} previous declaration(s) sent again${e.skipped.length > 0 ? `, ${e.skipped.length} listed, not sent (${e.skipped.map((x) => `${x.node}: ${x.code}`).join(', ')})` : ''}`;
    case 'nodeRolledBack':
      return `${when}  rollback: ${e.node} rolled back: its report names ${short(e.digest)} (serial ${e.serial}, restoring serial ${e.restores}'s spec, position ${e.position})`;
    case 'rollbackCompleted':
      return `${when}  rollback completed: ${e.done} rolled back, ${e.failed} failed, ${e.skipped} not sent${e.failures.length > 0 ? ` (${e.failures.map((f) => `${f.node} ${f.reason}`).join(', ')})` : ''}`;
  }
}

export function describeSelection(s: RolloutState['started']['selection']): string {
  switch (s.kind) {
    case 'nodes':
      return 'the nodes named';
    case 'all':
      return 'every node';
    case 'spec':
      return `the nodes on spec ${short(s.specDigest)}`;
    case 'prefix':
      return `ids starting ${JSON.stringify(s.prefix)}`;
  }
}

/** Why a halt happened, in words: the criterion that tripped, the budget, or no node done. */
function haltWhy(e: Extract<ExplainEntry, { kind: 'halted' }>): string {
  if (e.why === 'noneDone') return `its nodes settled with none done, so nothing proved the spec (${e.failures} failure(s))`;
  const c = e.criterion;
  if (c !== undefined)
    return `criterion ${c.asGiven} tripped: ${c.failures} ${c.classes.join('+')} failure(s) over the ${c.allowed} it allowed of ${c.settled} node(s) settled`;
  return `${e.failures} failure(s) over the budget of ${e.maxFailures}`;
}
