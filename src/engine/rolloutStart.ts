import { randomBytes } from 'node:crypto';
import { specDigestOf, validateSpec } from '../core/declaration/index.ts';
import { ConvergeError, isConvergeError } from '../core/errors.ts';
import {
  listLimit,
  makeRolloutEvent,
  maxRolloutDurationMs,
  onSupersededPolicies,
  rolloutGate,
  rolloutRamp,
  rolloutRate,
  rollbackPolicies,
  rolloutIdPattern,
  rolloutStreamOf,
} from '../core/events/index.ts';
import type {
  AbortCriterion,
  OnSuperseded,
  Recorded,
  RollbackOnHalt,
  RolloutAsOf,
  RolloutEvent,
  RolloutSelection,
  RolloutStarted,
  RolloutStartedData,
  WithId,
} from '../core/events/index.ts';
import type { EventStore } from '../store/port.ts';
import { validateNodeId } from '../core/wire/nodeId.ts';
import { foldRolloutEvents } from '../../projections/index.ts';
import { parseCriteria, planBudget, planWaves, selectTargets } from '../core/rollout/index.ts';
import type { NodeState } from '../../projections/index.ts';
import type { RolloutState, TargetSelection } from '../core/rollout/index.ts';
import { checkMoment } from './specAsOf.ts';
import type { Moment } from './specAsOf.ts';
import { createTurnBudget } from '../turnBudget.ts';
import type { TurnBudget } from '../turnBudget.ts';

// Starting a rollout (docs/design.md §8): the plan checked, its targets chosen, and both recorded
// in one append to a stream that must not exist yet. The other commands are rolloutCommands.ts's.

export type RolloutCommandDeps = Readonly<{ store: EventStore; now: () => Date }>;

export type StartRolloutDeps = RolloutCommandDeps &
  Readonly<{
    /** The fleet as the read model has it, for the selections taken from node states (all, spec, prefix). */
    nodeStates: () => Iterable<Pick<NodeState, 'node' | 'sent'> & Partial<Pick<NodeState, 'retiredAt'>>>;
    /** What an operator allows (serve --max-rollout-targets, --max-open-rollouts); absent: no limit. */
    limits?: Readonly<{ maxTargets: number; maxOpen: number }>;
    /** Rollouts not halted, completed or aborted, for --max-open-rollouts. */
    openRollouts?: () => number;
    /** Work per turn while a named node list is checked and deduplicated (ms; src/turnBudget.ts). */
    sliceMs?: number;
  }>;

/** serve's defaults: each target costs the read model and the driver memory, and each open rollout a share of the sends. */
export const defaultRolloutLimits = { maxTargets: 100_000, maxOpen: 16 } as const;

const limitError = (limit: string, message: string, max: number, got: number): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_ROLLOUT_PLAN', `${message}, past --${limit} (${max})`, { details: { limit, max, got } });

export type StartRolloutInput = Readonly<{
  /** The rollout's id (rolloutIdPattern); one is made from the time and 6 random hex digits if absent. */
  rollout?: string;
  /** The spec, validated as a declaration's (CONVERGE_ERR_SPEC_INVALID, _SPEC_DUPLICATE_ID). */
  resources: readonly unknown[];
  selection: TargetSelection;
  /** `1,10%,50%,100%`: cumulative counts or percentages of the targets. */
  waves: string;
  /** `3` or `5%` of the targets: failures of any class beyond it halt the rollout. Give this or `abortOn`. */
  maxFailures?: string;
  /**
   * Abort criteria by failure class, `refused+degraded:2,silent:10%@5` (src/core/rollout/criteria.ts):
   * failures of the classes a criterion names beyond its count, or its percentage of the nodes
   * settled so far (once `@n` have settled), halt the rollout. Give this or `maxFailures`.
   */
  abortOn?: string;
  waveTimeoutMs: number;
  /** Wait between a wave's completion and the next one's start (default 0). */
  pauseMs?: number;
  /** A node superseded from elsewhere: 'fail' counts it against the budget (default), 'hold' keeps its wave open. */
  onSuperseded?: OnSuperseded;
  /** What a halt rolls back (docs/design.md §8, "Rollback"): nothing (default), the halted wave's nodes, or every node sent. */
  rollbackOnHalt?: RollbackOnHalt;
  /** A pre-wave gate (docs/design.md §8, "Gates"): POSTed before each wave after the first; a 2xx opens it. */
  gate?: Readonly<{ url: string; timeoutMs: number }>;
  /** Metered sends (docs/design.md §8, "Rate"): nodes a minute over the whole rollout; or a ramp. Not both. */
  rate?: Readonly<{ perMinute: number }>;
  ramp?: Readonly<{ base: number; factor: number; cap: number; everyMs: number }>;
  /**
   * Restore from history (docs/design.md §8, "A rollout as of a moment"): each target is sent the
   * exact spec it had been sent at this time or store position, instead of `resources` (give `[]`).
   */
  asOf?: Moment;
  startedBy: string;
}>;

export type StartedRollout = Readonly<{ rollout: string; targets: number; waves: readonly number[] }>;

export const planError = (message: string, details?: Record<string, unknown>): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_ROLLOUT_PLAN', message, details === undefined ? undefined : { details });

/** `20261130-140211-3fa9c2`: sorts by start time, and two operators starting in one second still differ. */
export function newRolloutId(now: Date): string {
  const t = now.toISOString(); // 2026-11-30T14:02:11.123Z
  return `${t.slice(0, 10).replaceAll('-', '')}-${t.slice(11, 19).replaceAll(':', '')}-${randomBytes(3).toString('hex')}`;
}

function checkRolloutId(id: string): void {
  if (!rolloutIdPattern.test(id)) {
    throw planError(
      `rollout id ${JSON.stringify(id)} is not 1-63 lowercase letters, digits, dot, underscore or hyphen, starting with a letter or digit`,
      {
        rollout: id,
      },
    );
  }
}

const digestPattern = /^[0-9a-f]{64}$/;

/** Items of a long list handled between two looks at the clock. */
const itemsPerLook = 256;

/**
 * A named list's nodes, each checked, first places kept (selectTargets' rule for a list), a slice
 * of the turn at a time: 100,000 of them took one turn of ~50 ms, which every API request
 * arriving meanwhile waited for.
 */
async function namedTargets(nodes: readonly string[], budget: TurnBudget): Promise<string[]> {
  for (let i = 0; i < nodes.length; i++) {
    validateNodeId(nodes[i]!);
    if (i % itemsPerLook === itemsPerLook - 1 && budget.spent()) await budget.nextSlice();
  }
  const seen = new Set<string>();
  const out: string[] = [];
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i]!;
    if (!seen.has(n)) {
      seen.add(n);
      out.push(n);
    }
    if (i % itemsPerLook === itemsPerLook - 1 && budget.spent()) await budget.nextSlice();
  }
  return out;
}

function checkSelection(selection: TargetSelection): RolloutSelection {
  switch (selection.kind) {
    case 'nodes':
      // Each node's id is checked by namedTargets.
      if (selection.nodes.length === 0) throw planError('the node list is empty: name at least one node');
      return { kind: 'nodes' };
    case 'all':
      return { kind: 'all' };
    case 'spec':
      if (!digestPattern.test(selection.specDigest))
        throw planError(`spec digest ${JSON.stringify(selection.specDigest)} is not 64 lowercase hex characters`);
      return { kind: 'spec', specDigest: selection.specDigest };
    case 'prefix':
      if (selection.prefix === '') throw planError('the node id prefix is empty: use the "all" selection for every node');
      return { kind: 'prefix', prefix: selection.prefix };
    default:
      throw planError(`unknown selection ${JSON.stringify((selection as { kind?: unknown }).kind)}: nodes, all, spec or prefix`);
  }
}

const describeSelection = (s: TargetSelection): string =>
  s.kind === 'nodes'
    ? `the ${s.nodes.length} node(s) named`
    : s.kind === 'all'
      ? 'every node'
      : s.kind === 'spec'
        ? `the nodes on spec ${s.specDigest.slice(0, 12)}`
        : `the nodes whose id starts with ${JSON.stringify(s.prefix)}`;

/**
 * Plan a rollout and record it: RolloutStarted and its targets (RolloutNodesListed, 1,000 a list)
 * in one append to a stream that must not exist yet. Nothing is sent here; the driver opens the
 * first wave once it folds these events.
 */
export async function startRollout(deps: StartRolloutDeps, input: StartRolloutInput): Promise<StartedRollout> {
  const now = deps.now();
  const rollout = input.rollout ?? newRolloutId(now);
  checkRolloutId(rollout);
  const spec = validateSpec({ resources: input.resources });
  const asOf = input.asOf === undefined ? undefined : await planAsOf(deps.store, input.asOf, now, spec.resources.length);
  const selection = checkSelection(input.selection);
  if (!Number.isSafeInteger(input.waveTimeoutMs) || input.waveTimeoutMs < 1 || input.waveTimeoutMs > maxRolloutDurationMs)
    throw planError(
      `the wave timeout must be a whole number of milliseconds from 1 to ${maxRolloutDurationMs} (30 days) (got ${input.waveTimeoutMs})`,
    );
  const pauseMs = input.pauseMs ?? 0;
  if (input.onSuperseded !== undefined && !onSupersededPolicies.includes(input.onSuperseded))
    throw planError(`on superseded must be fail or hold (got ${JSON.stringify(input.onSuperseded)})`);
  if (input.rollbackOnHalt !== undefined && !rollbackPolicies.includes(input.rollbackOnHalt))
    throw planError(`rollback on halt must be none, wave or all (got ${JSON.stringify(input.rollbackOnHalt)})`);
  if (input.rate !== undefined && input.ramp !== undefined) throw planError('a plan has a rate or a ramp, not both');
  if (input.rate !== undefined && !rolloutRate.safeParse(input.rate).success)
    throw planError(`the rate is a positive number of sends a minute (got ${JSON.stringify(input.rate)})`);
  if (input.ramp !== undefined && !rolloutRamp.safeParse(input.ramp).success)
    throw planError(
      `the ramp needs base and cap > 0 (cap >= base) a minute, a factor >= 1 and everyMs >= 1000 (got ${JSON.stringify(input.ramp)})`,
    );
  if (input.gate !== undefined && !rolloutGate.safeParse(input.gate).success)
    throw planError(`the gate needs an http(s) url and a timeout of 1 to 300000 ms (got ${JSON.stringify(input.gate)})`);
  if (!Number.isSafeInteger(pauseMs) || pauseMs < 0 || pauseMs > maxRolloutDurationMs)
    throw planError(
      `the pause between waves must be a whole number of milliseconds from 0 to ${maxRolloutDurationMs} (30 days) (got ${pauseMs})`,
    );

  const open = deps.openRollouts?.() ?? 0;
  if (deps.limits !== undefined && open >= deps.limits.maxOpen)
    throw limitError('max-open-rollouts', `${open} rollouts are open (not halted, completed or aborted)`, deps.limits.maxOpen, open);
  // A retired node is no target of --all, --spec or --prefix; named with --nodes, its send brings it back.
  const targets =
    input.selection.kind === 'nodes'
      ? await namedTargets(input.selection.nodes, createTurnBudget(deps.sliceMs === undefined ? {} : { sliceMs: deps.sliceMs }))
      : selectTargets(
          input.selection,
          [...deps.nodeStates()].filter((s) => (s.retiredAt ?? null) === null),
        );
  if (deps.limits !== undefined && targets.length > deps.limits.maxTargets)
    throw limitError('max-rollout-targets', `the selection has ${targets.length} targets`, deps.limits.maxTargets, targets.length);
  if (targets.length === 0) throw planError(`no node to roll out to: ${describeSelection(input.selection)} selected none`);
  const waves = planWaves(input.waves, targets.length);
  if (typeof waves === 'string') throw planError(waves, { waves: input.waves });
  const { maxFailures, criteria } = planAbort(input, targets.length);

  const at = now.toISOString();
  const events: WithId<RolloutEvent>[] = [
    makeRolloutEvent('RolloutStarted', {
      rollout,
      resources: [...spec.resources],
      specDigest: specDigestOf(spec.resources),
      selection,
      targets: targets.length,
      waves: [...waves.cumulative],
      asGiven:
        criteria === undefined
          ? { waves: input.waves, maxFailures: input.maxFailures ?? '0' }
          : { waves: input.waves, maxFailures: '', abortOn: input.abortOn ?? '' },
      maxFailures,
      ...(criteria === undefined ? {} : { criteria }),
      waveTimeoutMs: input.waveTimeoutMs,
      pauseMs,
      onSuperseded: input.onSuperseded ?? 'fail',
      ...(input.rollbackOnHalt === undefined || input.rollbackOnHalt === 'none' ? {} : { rollbackOnHalt: input.rollbackOnHalt }),
      ...(input.gate === undefined ? {} : { gate: { url: input.gate.url, timeoutMs: input.gate.timeoutMs } }),
      ...(input.rate === undefined ? {} : { rate: { perMinute: input.rate.perMinute } }),
      ...(input.ramp === undefined ? {} : { ramp: { ...input.ramp } }),
      ...(asOf === undefined ? {} : { asOf }),
      startedBy: input.startedBy,
      startedAt: at,
    }),
  ];
  for (let from = 0; from < targets.length; from += listLimit) {
    events.push(makeRolloutEvent('RolloutNodesListed', { rollout, from, nodes: targets.slice(from, from + listLimit), listedAt: at }));
  }
  const started = events[0] as WithId<RolloutStarted>;
  let written = 0;
  try {
    written = (await deps.store.append([{ stream: rolloutStreamOf(rollout), expected: 'no_stream', events }])).streams[0]?.written ?? 0;
  } catch (err) {
    if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION') && !isConvergeError(err, 'CONVERGE_ERR_DUPLICATE_EVENT_ID'))
      throw err;
  }
  if (written === 0) {
    // The id is taken. The same start sent again (a client retrying after a lost answer) is
    // answered as the first was; anything else is a plan for another rollout under a taken id.
    const stored = await readRollout(deps.store, rollout);
    if (stored === null || !samePlan(stored, started.data, targets))
      throw planError(`a rollout named ${JSON.stringify(rollout)} exists already: choose another id`, { rollout });
  }
  return { rollout, targets: targets.length, waves: waves.cumulative };
}

/**
 * The moment of a rollout as of a moment, checked: a time gone by or a position the store holds
 * (a time to come has no history yet), and no spec beside it. Its history ends at the head now.
 */
async function planAsOf(store: EventStore, m: Moment, now: Date, specSize: number): Promise<RolloutAsOf> {
  if (specSize > 0) throw planError('give a spec to roll out or a moment to restore (asOf), not both');
  const head = await checkMoment(store, m, now, 'CONVERGE_ERR_ROLLOUT_PLAN');
  return 'at' in m ? { at: m.at.toISOString(), upTo: head.toString() } : { position: m.position.toString(), upTo: head.toString() };
}

/**
 * The plan's budget: a single one over every class (`maxFailures`, default `0`), or criteria by
 * class (`abortOn`), whose rollouts record the targets' count as maxFailures, which no count of
 * failures exceeds, for readers that know only the single budget.
 */
function planAbort(input: StartRolloutInput, targets: number): { maxFailures: number; criteria?: AbortCriterion[] } {
  if (input.abortOn !== undefined) {
    if (input.maxFailures !== undefined) throw planError('give the failure budget (maxFailures) or abort criteria (abortOn), not both');
    const criteria = parseCriteria(input.abortOn, input.onSuperseded ?? 'fail');
    if (typeof criteria === 'string') throw planError(criteria, { abortOn: input.abortOn });
    return { maxFailures: targets, criteria };
  }
  const text = input.maxFailures ?? '0';
  const maxFailures = planBudget(text, targets);
  if (typeof maxFailures === 'string') throw planError(maxFailures, { maxFailures: text });
  return { maxFailures };
}

function samePlan(s: RolloutState, d: RolloutStartedData, targets: readonly string[]): boolean {
  const a = s.started;
  return (
    a.specDigest === d.specDigest &&
    JSON.stringify(a.selection) === JSON.stringify(d.selection) &&
    JSON.stringify(a.waves) === JSON.stringify(d.waves) &&
    a.maxFailures === d.maxFailures &&
    JSON.stringify(a.criteria) === JSON.stringify(d.criteria) &&
    a.waveTimeoutMs === d.waveTimeoutMs &&
    a.pauseMs === d.pauseMs &&
    (a.onSuperseded ?? 'fail') === (d.onSuperseded ?? 'fail') &&
    (a.rollbackOnHalt ?? 'none') === (d.rollbackOnHalt ?? 'none') &&
    JSON.stringify(a.gate) === JSON.stringify(d.gate) &&
    JSON.stringify(a.rate) === JSON.stringify(d.rate) &&
    JSON.stringify(a.ramp) === JSON.stringify(d.ramp) &&
    a.asOf?.at === d.asOf?.at &&
    a.asOf?.position === d.asOf?.position &&
    a.startedBy === d.startedBy &&
    s.targets.length === targets.length &&
    s.targets.every((n, i) => n === targets[i])
  );
}

/** A rollout folded from the store, or null if its stream is empty. */
export async function readRollout(store: EventStore, id: string): Promise<RolloutState | null> {
  const events = await store.readStream(rolloutStreamOf(id));
  return foldRolloutEvents(events as readonly Recorded<RolloutEvent>[]);
}
