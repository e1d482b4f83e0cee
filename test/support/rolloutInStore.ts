import { foldNodeEvents, foldRolloutEvents } from '../../projections/index.ts';
import { decide, eventOfDecision, planBudget, planWaves, waveProgress } from '../../src/core/rollout/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { Decision, RolloutState } from '../../src/core/rollout/index.ts';
import type { Resource } from '../../src/core/declaration/index.ts';
import { specDigestOf } from '../../src/core/declaration/index.ts';
import { makeRolloutEvent, rolloutStreamOf, streamOf } from '../../src/core/events/index.ts';
import type { Recorded, RolloutEvent, RolloutSelection, WithId } from '../../src/core/events/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { StoreHistory } from './history.ts';

// A rollout written to a real store by the pure decision of projections/rollout.ts, as the driver
// would write it, on the history's clock: for the read side's tests (the view, the API,
// the CLI) without the driver process. Each step folds the rollout's and the nodes' streams from
// the store, so it is a reference independent of the read model.

export type RolloutScriptOptions = Readonly<{
  waves?: string;
  maxFailures?: string;
  waveTimeoutMs?: number;
  pauseMs?: number;
  resources?: readonly Resource[];
  selection?: RolloutSelection;
  startedBy?: string;
}>;

export function rolloutInStore(
  store: EventStore,
  h: StoreHistory,
  id: string,
  nodes: readonly string[],
  options: RolloutScriptOptions = {},
) {
  const resources = options.resources ?? [{ id: 'web', image: 'nginx:1.27' }];
  const stream = rolloutStreamOf(id);
  const iso = (): string => h.now().toISOString();

  const state = async (): Promise<RolloutState> => {
    const s = foldRolloutEvents((await store.readStream(stream)) as Recorded<RolloutEvent>[]);
    if (s === null) throw new Error(`rollout ${id} not started`);
    return s;
  };
  const nodeStates = async (names: readonly string[]): Promise<Map<string, NodeState>> => {
    const out = new Map<string, NodeState>();
    for (const n of names) {
      const events = await store.readStream(streamOf(n));
      if (events.length > 0) out.set(n, foldNodeEvents(n, events));
    }
    return out;
  };
  const record = async (e: WithId<RolloutEvent>): Promise<bigint> => {
    const r = await store.append([{ stream, expected: 'any', events: [e] }]);
    return r.position ?? -1n;
  };

  return {
    id,
    resources,
    state,
    async start(): Promise<void> {
      const plan = planWaves(options.waves ?? '100%', nodes.length);
      const budget = planBudget(options.maxFailures ?? '0', nodes.length);
      if (typeof plan === 'string' || typeof budget === 'string') throw new Error(String(plan));
      const started = makeRolloutEvent('RolloutStarted', {
        rollout: id,
        resources: resources as { id: string }[],
        specDigest: specDigestOf(resources),
        selection: options.selection ?? { kind: 'nodes' },
        targets: nodes.length,
        waves: [...plan.cumulative],
        asGiven: { waves: options.waves ?? '100%', maxFailures: options.maxFailures ?? '0' },
        maxFailures: budget,
        waveTimeoutMs: options.waveTimeoutMs ?? 60_000,
        pauseMs: options.pauseMs ?? 0,
        startedBy: options.startedBy ?? 'test',
        startedAt: iso(),
      });
      const listed = makeRolloutEvent('RolloutNodesListed', { rollout: id, from: 0, nodes: [...nodes], listedAt: iso() });
      await store.append([{ stream, expected: 'no_stream', events: [started, listed] }]);
    },
    async decide(): Promise<Decision> {
      const s = await state();
      const w = s.waves[s.current - 1];
      const states = await nodeStates(w === undefined ? [] : s.targets.slice(w.from, w.to));
      return decide(
        s,
        waveProgress(s, s.current, (n) => states.get(n)),
        h.now().getTime(),
      );
    },
    /** Carry a decision out: sends go to the node streams, then RolloutSent lists them; the rest is recorded. */
    async apply(d: Decision): Promise<void> {
      if (d.kind === 'wait') return;
      const s = await state();
      if (d.kind === 'send') {
        const sends = [];
        for (const n of d.nodes) {
          const r = await h.send(n, resources, { id, wave: d.wave });
          sends.push({ node: n, serial: r.serial, digest: r.digest });
        }
        await record(
          makeRolloutEvent('RolloutSent', { rollout: id, wave: d.wave, sends, skipped: [], sentAt: iso() }, { revision: s.revision }),
        );
        return;
      }
      if (d.kind === 'rollbackSend' || d.kind === 'gate') throw new Error('this world does not roll back, nor has it a gate');
      await record(eventOfDecision(s, d, iso()));
    },
    /** Decide and apply until there is nothing to do now; returns the decisions' kinds. */
    async run(): Promise<string[]> {
      const kinds: string[] = [];
      for (let i = 0; i < 100; i++) {
        const d = await this.decide();
        kinds.push(d.kind === 'wait' ? `wait(${d.why})` : d.kind);
        if (d.kind === 'wait') return kinds;
        await this.apply(d);
      }
      throw new Error('the rollout did not settle');
    },
    /** A RolloutSent listing nodes the spec could not be sent to. */
    async skip(wave: number, node: string, code = 'CONVERGE_ERR_PORT_CARRIED', reason = 'port 8080 is carried'): Promise<bigint> {
      const s = await state();
      return record(
        makeRolloutEvent(
          'RolloutSent',
          { rollout: id, wave, sends: [], skipped: [{ node, code, reason }], sentAt: iso() },
          { revision: s.revision },
        ),
      );
    },
    pause: async (reason = ''): Promise<bigint> =>
      record(makeRolloutEvent('RolloutPaused', { rollout: id, by: 'test', reason, at: iso() }, { revision: (await state()).revision })),
    resume: async (): Promise<bigint> =>
      record(makeRolloutEvent('RolloutResumed', { rollout: id, by: 'test', at: iso() }, { revision: (await state()).revision })),
    abort: async (reason = 'stop'): Promise<bigint> =>
      record(makeRolloutEvent('RolloutAborted', { rollout: id, by: 'test', reason, at: iso() })),
    digestSentTo: async (n: string): Promise<string> => {
      const send = (await state()).sends.get(n);
      if (send === undefined) throw new Error(`rollout ${id} sent nothing to ${n}`);
      return send.digest;
    },
  };
}

export type RolloutScript = ReturnType<typeof rolloutInStore>;
