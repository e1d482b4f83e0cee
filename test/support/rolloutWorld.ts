import assert from 'node:assert/strict';
import { foldNodeEvents, foldRolloutEvents } from '../../projections/index.ts';
import { decide, eventOfDecision, planWaves, waveProgress } from '../../src/core/rollout/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { Decision, RolloutState } from '../../src/core/rollout/index.ts';
import { specDigestOf } from '../../src/core/declaration/index.ts';
import { makeRolloutEvent } from '../../src/core/events/index.ts';
import type { AbortCriterion, Recorded, RolloutEvent, WithId } from '../../src/core/events/index.ts';
import { history } from './history.ts';

// A pure world: one rollout stream and the node streams, numbered by one global position.
export function world(
  id: string,
  nodes: readonly string[],
  options: {
    waves: string;
    maxFailures?: number;
    timeoutMs?: number;
    pauseMs?: number;
    onSuperseded?: 'fail' | 'hold' | null;
    /** Abort criteria by class (src/core/rollout/criteria.ts); absent: the single budget maxFailures. */
    criteria?: AbortCriterion[];
    /** The liveness grace a late node is judged silent by. */
    graceMs?: number;
  },
) {
  let position = 0n;
  let clock = Date.parse('2026-11-30T14:00:00Z');
  const rollout: Recorded<RolloutEvent>[] = [];
  const histories = new Map(nodes.map((n) => [n, history(n, clock)]));
  const resources = [{ id: 'web', image: 'nginx:1.27' }];
  const iso = (): string => new Date(clock).toISOString();
  const record = (e: WithId<RolloutEvent>): void => {
    rollout.push({ ...e, stream: `rollout-${id}`, revision: BigInt(rollout.length), position: ++position } as Recorded<RolloutEvent>);
  };
  const plan = planWaves(options.waves, nodes.length);
  assert.ok(typeof plan !== 'string');
  record(
    makeRolloutEvent('RolloutStarted', {
      rollout: id,
      resources,
      specDigest: specDigestOf(resources),
      selection: { kind: 'nodes' },
      targets: nodes.length,
      waves: [...plan.cumulative],
      asGiven: { waves: options.waves, maxFailures: String(options.maxFailures ?? 0) },
      maxFailures: options.maxFailures ?? 0,
      waveTimeoutMs: options.timeoutMs ?? 60_000,
      pauseMs: options.pauseMs ?? 0,
      ...(options.onSuperseded ? { onSuperseded: options.onSuperseded } : {}),
      ...(options.criteria ? { criteria: options.criteria } : {}),
      startedBy: 'test',
      startedAt: iso(),
    }),
  );
  record(makeRolloutEvent('RolloutNodesListed', { rollout: id, from: 0, nodes: [...nodes], listedAt: iso() }));
  const state = (): RolloutState => foldRolloutEvents(rollout)!;
  const node = (n: string): NodeState => foldNodeEvents(n, histories.get(n)!.events);
  const h = (n: string) => histories.get(n)!;
  return {
    state,
    node,
    h,
    tick: (ms: number) => {
      clock += ms;
      for (const x of histories.values()) x.tick(ms);
    },
    now: () => clock,
    progress: () => waveProgress(state(), state().current, (n) => (histories.has(n) ? node(n) : undefined), 1_000, options.graceMs),
    decide: (): Decision =>
      decide(
        state(),
        waveProgress(state(), state().current, (n) => node(n), 1_000, options.graceMs),
        clock,
      ),
    /** Carry out a decision as the driver would: sends go to the node streams and RolloutSent, the rest is recorded. */
    apply(d: Decision): void {
      if (d.kind === 'wait') return;
      const s = state();
      if (d.kind === 'send') {
        const sends = d.nodes.map((n) => {
          const e = h(n).send(resources, { id, wave: d.wave });
          return { node: n, serial: e.data.serial, digest: e.data.digest };
        });
        record(makeRolloutEvent('RolloutSent', { rollout: id, wave: d.wave, sends, skipped: [], sentAt: iso() }, { revision: s.revision }));
        return;
      }
      if (d.kind === 'rollbackSend' || d.kind === 'gate') throw new Error('this world does not roll back, nor has it a gate');
      record(eventOfDecision(s, d, iso()));
    },
    pause: () =>
      record(makeRolloutEvent('RolloutPaused', { rollout: id, by: 'test', reason: '', at: iso() }, { revision: state().revision })),
    resume: () => record(makeRolloutEvent('RolloutResumed', { rollout: id, by: 'test', at: iso() }, { revision: state().revision })),
    /** Decide and apply until the driver has nothing to do now; returns the decisions taken. */
    run(): Decision[] {
      const taken: Decision[] = [];
      for (let i = 0; i < 100; i++) {
        const d = this.decide();
        taken.push(d);
        if (d.kind === 'wait') return taken;
        this.apply(d);
      }
      throw new Error('the driver did not settle');
    },
    digestSentTo: (n: string): string => state().sends.get(n)!.digest,
  };
}
