import { createRaceScanner, foldNode, foldRollout, initialNodeState, startRollout } from '../../projections/index.ts';
import { nodeOutcome, failureDetail, rollbackOutcome } from '../core/rollout/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { NodeOutcome, RolloutState } from '../core/rollout/index.ts';
import { ConvergeError } from '../core/errors.ts';
import type { Recorded, RolloutEvent, RolloutFailure, WaveGateCheckedData } from '../core/events/index.ts';
import { isNodeEvent, isRollbackSendOf, rolloutStreamOf, streamOf } from '../core/events/index.ts';
import type { EventStore } from '../store/index.ts';

export { describeSelection, explainLine } from './rolloutExplainText.ts';

// `converge rollout explain <id>`: a rollout's story told from the events alone —
// its own stream and the streams of its targets, merged in store order and folded again with the
// same functions the engine used. When each wave opened and why, which report completed which
// node, which node failed or was superseded, and every stale report the clock rule ("a report
// that arrived after the send means the node read it") would have counted as done.

export type ExplainEntry = Readonly<
  { at: string; position: string } & (
    | {
        kind: 'started';
        targets: number;
        waves: readonly number[];
        asGiven: RolloutState['started']['asGiven'];
        maxFailures: number;
        waveTimeoutMs: number;
        pauseMs: number;
        startedBy: string;
        specDigest: string;
        selection: RolloutState['started']['selection'];
        /** Each node's own spec as of this moment instead of one (docs/design.md §8); absent: one spec. */
        asOf?: RolloutState['started']['asOf'];
      }
    | {
        kind: 'waveOpened';
        wave: number;
        from: number;
        to: number;
        /** Why: the wave before completed (null for the first wave). */
        because: Readonly<{
          wave: number;
          size: number;
          done: number;
          failed: number;
          superseded: number;
          /** The report that completed the wave before (null: its last nodes failed or timed out, or the lists did not say). */
          last: Readonly<{ node: string; digest: string; at: string; position: string }> | null;
        }> | null;
      }
    | { kind: 'sent'; wave: number; sends: number; skipped: readonly Readonly<{ node: string; code: string; reason: string }>[] }
    /** The plan's gate answered before a wave (docs/design.md §8 "Gates"): a 2xx opens it, anything else holds it. */
    | { kind: 'gate'; wave: number; passed: boolean; status: number | null; detail: string; attempt: number }
    /** A report that named the digest this rollout sent the node, with the node converged: done. */
    | { kind: 'nodeDone'; wave: number; node: string; digest: string; serial: number; latencyMs: number | null }
    | { kind: 'nodeFailed'; wave: number; node: string; outcome: NodeOutcome; detail: string }
    | { kind: 'nodeSuperseded'; wave: number; node: string; by: Readonly<{ serial: number; digest: string }> }
    /** A report about an earlier declaration that arrived after this rollout's send: the clock rule would have counted it. */
    | {
        kind: 'staleReport';
        wave: number;
        node: string;
        reported: string | null;
        reportedSerial: number | null;
        ours: string;
        oursSerial: number;
        sentAt: string;
      }
    | { kind: 'waveCompleted'; wave: number; done: number; failed: number; superseded: number; failures: readonly RolloutFailure[] }
    | { kind: 'paused'; by: string; reason: string }
    | { kind: 'resumed'; by: string }
    | {
        kind: 'halted';
        wave: number;
        failures: number;
        maxFailures: number;
        failed: readonly RolloutFailure[];
        /** The abort criterion that tripped (rollouts planned with criteria). */
        criterion?: NonNullable<RolloutState['halted']>['criterion'];
        why: 'overBudget' | 'noneDone';
      }
    | { kind: 'completed'; done: number; failed: number; superseded: number }
    | { kind: 'aborted'; by: string; reason: string }
    // A rollback (docs/design.md §8, "Rollback"), told like a wave.
    | { kind: 'rollbackStarted'; scope: 'wave' | 'all'; wave: number; by: string; reason: string }
    | { kind: 'rollbackSent'; sends: number; skipped: readonly Readonly<{ node: string; code: string; reason: string }>[] }
    /** A report that named the digest of the declaration the rollback sent the node (its previous spec again). */
    | { kind: 'nodeRolledBack'; node: string; digest: string; serial: number; restores: number }
    | { kind: 'rollbackCompleted'; done: number; failed: number; skipped: number; failures: readonly RolloutFailure[] }
  )
>;

export type RolloutExplanation = Readonly<{ rollout: string; status: RolloutState['status']; entries: readonly ExplainEntry[] }>;

/** The rollout's stream and its targets' streams, folded again in store order. */
export async function explainRollout(store: EventStore, id: string): Promise<RolloutExplanation> {
  const own = (await store.readStream(rolloutStreamOf(id))) as readonly Recorded<RolloutEvent>[];
  const first = own[0];
  let rollout = first === undefined ? null : startRollout(first);
  if (rollout === null)
    throw new ConvergeError('CONVERGE_ERR_ROLLOUT_NOT_FOUND', `no rollout named ${JSON.stringify(id)}`, { details: { rollout: id } });
  for (const e of own.slice(1)) rollout = foldRollout(rollout, e);
  const targets = rollout.targets;

  const events: Recorded[] = [...own];
  for (const node of targets) events.push(...(await store.readStream(streamOf(node))));
  events.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
  return explainEvents(id, events);
}

const pick = (d: WaveGateCheckedData) => ({ wave: d.wave, passed: d.passed, status: d.status, detail: d.detail, attempt: d.attempt });

/** The same story from events already in store order (a rollout's stream and its targets' streams). */
export function explainEvents(id: string, events: readonly Recorded[]): RolloutExplanation {
  const entries: ExplainEntry[] = [];
  let s: RolloutState | null = null;
  const nodes = new Map<string, NodeState>();
  const outcomes = new Map<string, NodeOutcome>();
  const races = createRaceScanner();
  /** Per wave, the last report that completed one of its nodes. */
  const lastDone = new Map<number, { node: string; digest: string; at: string; position: string }>();
  const waveOf = (node: string): number => s?.sends.get(node)?.wave ?? s?.skipped.get(node)?.wave ?? 0;

  const rolledBack = new Set<string>();
  const recountRollback = (node: string, e: Recorded): void => {
    const rb = s?.rollback?.sends.get(node);
    if (s === null || rb === undefined || rolledBack.has(node)) return;
    if (rollbackOutcome(s, node, nodes.get(node)) !== 'done') return;
    rolledBack.add(node);
    const at = e.type === 'ReportReceived' ? e.data.receivedAt : eventAt(e);
    entries.push({
      kind: 'nodeRolledBack',
      at,
      position: e.position.toString(),
      node,
      digest: rb.digest,
      serial: rb.serial,
      restores: rb.restores.serial,
    });
  };

  const recount = (node: string, e: Recorded): void => {
    if (s === null) return;
    // Once rolled back, a node's story is the rollback's: its newer send is not a supersession.
    if (s.rollback?.sends.has(node) === true) return recountRollback(node, e);
    if (isRollbackSendOf(e, s.id)) return; // folded just before the RollbackSent that lists it

    const send = s.sends.get(node);
    const skip = s.skipped.get(node);
    if (send === undefined && skip === undefined) return;
    const state = nodes.get(node);
    const next = nodeOutcome(send, skip, state);
    const before = outcomes.get(node) ?? 'unsent';
    if (next === before) return;
    outcomes.set(node, next);
    const position = e.position.toString();
    const wave = waveOf(node);
    const at = e.type === 'ReportReceived' ? e.data.receivedAt : e.type === 'DeclarationSent' ? e.data.sentAt : eventAt(e);
    if (next === 'done' && send !== undefined) {
      const ack = state?.sent?.acknowledgedAt;
      const latencyMs = ack === null || ack === undefined ? null : Date.parse(ack) - Date.parse(state!.sent!.sentAt);
      entries.push({ kind: 'nodeDone', at, position, wave, node, digest: send.digest, serial: send.serial, latencyMs });
      lastDone.set(wave, { node, digest: send.digest, at, position });
    } else if (next === 'superseded' && state?.sent != null) {
      entries.push({ kind: 'nodeSuperseded', at, position, wave, node, by: { serial: state.sent.serial, digest: state.sent.digest } });
    } else if (next === 'refused' || next === 'degraded' || next === 'unsendable') {
      entries.push({ kind: 'nodeFailed', at, position, wave, node, outcome: next, detail: failureDetail(next, state, skip) });
    }
  };

  for (const e of events) {
    const position = e.position.toString();
    if (isNodeEvent(e)) {
      const node = e.data.node;
      nodes.set(node, foldNode(nodes.get(node) ?? initialNodeState(node), e));
      const race = races.push(e);
      const send = s?.sends.get(node);
      if (race !== null && send !== undefined && race.currentDigest === send.digest && (outcomes.get(node) ?? 'pending') === 'pending') {
        entries.push({
          kind: 'staleReport',
          at: race.receivedAt,
          position,
          wave: send.wave,
          node,
          reported: race.reportDigest,
          reportedSerial: race.reportSerial,
          ours: send.digest,
          oursSerial: send.serial,
          sentAt: send.sentAt,
        });
      }
      recount(node, e);
      continue;
    }
    const r = e as Recorded<RolloutEvent>;
    if ((r.data as { rollout?: string }).rollout !== id) continue;
    if (s === null) {
      s = startRollout(r);
      if (s === null) continue;
      const d = s.started;
      entries.push({
        kind: 'started',
        at: d.startedAt,
        position,
        targets: d.targets,
        waves: d.waves,
        asGiven: d.asGiven,
        maxFailures: d.maxFailures,
        waveTimeoutMs: d.waveTimeoutMs,
        pauseMs: d.pauseMs,
        startedBy: d.startedBy,
        specDigest: d.specDigest,
        selection: d.selection,
        ...(d.asOf === undefined ? {} : { asOf: d.asOf }),
      });
      continue;
    }
    const previous: RolloutState = s;
    s = foldRollout(s, r);
    switch (r.type) {
      case 'WaveStarted': {
        const d = r.data;
        const before = previous.waves[d.wave - 2];
        const c = before?.completed ?? null;
        entries.push({
          kind: 'waveOpened',
          at: d.startedAt,
          position,
          wave: d.wave,
          from: d.from,
          to: d.to,
          because:
            before === undefined || c === null
              ? null
              : {
                  wave: before.wave,
                  size: before.to - before.from,
                  done: c.done,
                  failed: c.failed,
                  superseded: c.superseded,
                  last: lastDone.get(before.wave) ?? null,
                },
        });
        break;
      }
      case 'RolloutSent': {
        const d = r.data;
        entries.push({ kind: 'sent', at: d.sentAt, position, wave: d.wave, sends: d.sends.length, skipped: d.skipped });
        // The sends may have been folded into the nodes before this event (same append): count them now.
        for (const x of d.sends) recount(x.node, r);
        for (const x of d.skipped) recount(x.node, r);
        break;
      }
      case 'WaveCompleted': {
        const d = r.data;
        entries.push({
          kind: 'waveCompleted',
          at: d.completedAt,
          position,
          wave: d.wave,
          done: d.done,
          failed: d.failed,
          superseded: d.superseded,
          failures: d.failures,
        });
        break;
      }
      case 'WaveGateChecked':
        entries.push({ kind: 'gate', at: r.data.at, position, ...pick(r.data) });
        break;
      case 'RolloutPaused':
        entries.push({ kind: 'paused', at: r.data.at, position, by: r.data.by, reason: r.data.reason });
        break;
      case 'RolloutResumed':
        entries.push({ kind: 'resumed', at: r.data.at, position, by: r.data.by });
        break;
      case 'RolloutHalted':
        entries.push({
          kind: 'halted',
          at: r.data.at,
          position,
          wave: r.data.wave,
          failures: r.data.failures,
          maxFailures: r.data.maxFailures,
          failed: r.data.failed,
          why: r.data.why ?? 'overBudget',
          ...(r.data.criterion === undefined ? {} : { criterion: r.data.criterion }),
        });
        break;
      case 'RolloutCompleted':
        entries.push({
          kind: 'completed',
          at: r.data.at,
          position,
          done: r.data.done,
          failed: r.data.failed,
          superseded: r.data.superseded,
        });
        break;
      case 'RolloutAborted':
        entries.push({ kind: 'aborted', at: r.data.at, position, by: r.data.by, reason: r.data.reason });
        break;
      case 'RollbackStarted': {
        const d = r.data;
        entries.push({ kind: 'rollbackStarted', at: d.at, position, scope: d.scope, wave: d.wave, by: d.by, reason: d.reason });
        break;
      }
      case 'RollbackSent': {
        const d = r.data;
        entries.push({ kind: 'rollbackSent', at: d.sentAt, position, sends: d.sends.length, skipped: d.skipped });
        for (const x of d.sends) recount(x.node, r);
        break;
      }
      case 'RollbackCompleted': {
        const d = r.data;
        entries.push({
          kind: 'rollbackCompleted',
          at: d.at,
          position,
          done: d.done,
          failed: d.failed,
          skipped: d.skipped,
          failures: d.failures,
        });
        break;
      }
      default:
        break;
    }
  }
  if (s === null)
    throw new ConvergeError('CONVERGE_ERR_ROLLOUT_NOT_FOUND', `no rollout named ${JSON.stringify(id)}`, { details: { rollout: id } });
  return { rollout: id, status: s.status, entries };
}

function eventAt(e: Recorded): string {
  const d = e.data as Record<string, unknown>;
  for (const k of ['at', 'sentAt', 'startedAt', 'completedAt', 'listedAt']) if (typeof d[k] === 'string') return d[k];
  return '';
}
