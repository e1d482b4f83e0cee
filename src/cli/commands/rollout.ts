import { isTerminal } from '../../core/rollout/index.ts';
import type { TargetSelection } from '../../core/rollout/index.ts';
import { abortRollout, pauseRollout, resumeRollout, rollbackRollout, startRollout } from '../../engine/rolloutCommands.ts';
import type { StartRolloutInput } from '../../engine/rolloutCommands.ts';
import { ConvergeError } from '../../core/errors.ts';
import { parseMoment } from '../../engine/specAsOf.ts';
import type { Moment } from '../../engine/specAsOf.ts';
import { explainLine, explainRollout } from '../../readModel/rolloutExplain.ts';
import type { EventStore } from '../../store/index.ts';
import type { Context, Run } from '../command.ts';
import { openStore, withStore } from '../command.ts';
import { parseDuration } from '../duration.ts';
import { who } from '../operator.ts';
import { printJson, printList, printOne } from '../output.ts';
import { readSpecJson } from '../specFile.ts';
import { foldStore } from './readModelFromStore.ts';
import { foldRollouts } from './rolloutViewFromStore.ts';
import type { FoldedRollouts } from './rolloutViewFromStore.ts';
import { rolloutDetail } from './rolloutText.ts';
import type { FailedNode } from './rolloutText.ts';

// `converge rollout start|status|pause|resume|abort|rollback|explain` (§7). Like `send`, the
// commands write to the store (the engine's commands, src/engine/rolloutCommands.ts) and a
// running `serve` on the same store drives the waves; like `status`, the reads fold the store
// themselves (the same view the API serves), so they work without a server.

const verbs = ['start', 'status', 'pause', 'resume', 'abort', 'rollback', 'explain'] as const;
type Verb = (typeof verbs)[number];

const usage = (message: string): ConvergeError => new ConvergeError('CONVERGE_ERR_USAGE', message);

const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

/** `--rate 60` (nodes a minute) or `--ramp 10,2,200,5m` (base, factor, cap a minute, every): docs/design.md §8 "Rate". */
function meterFlags(values: Context['values']): Pick<StartRolloutInput, 'rate' | 'ramp'> {
  const rate = str(values.rate);
  const ramp = str(values.ramp);
  if (rate !== undefined && ramp !== undefined) throw usage('give --rate or --ramp, not both');
  if (rate !== undefined) {
    if (!/^\d+(\.\d+)?$/.test(rate)) throw usage(`--rate is nodes a minute, like 60 (got ${JSON.stringify(rate)})`);
    return { rate: { perMinute: Number(rate) } };
  }
  if (ramp === undefined) return {};
  const [base, factor, cap, every] = ramp.split(',');
  const nums = [base, factor, cap].map((x) => (x !== undefined && /^\d+(\.\d+)?$/.test(x) ? Number(x) : NaN));
  if (nums.some((x) => Number.isNaN(x)) || every === undefined)
    throw usage(`--ramp is base,factor,cap,every, like 10,2,200,5m (got ${JSON.stringify(ramp)})`);
  return { ramp: { base: nums[0]!, factor: nums[1]!, cap: nums[2]!, everyMs: parseDuration('ramp', every) } };
}

function selectionOf(values: Context['values']): TargetSelection {
  const given = (['nodes', 'all', 'spec', 'prefix'] as const).filter((k) => values[k] !== undefined && values[k] !== false);
  if (given.length !== 1)
    throw usage(
      `rollout start takes exactly one of --nodes a,b, --all, --spec <digest>, --prefix <p>${given.length > 1 ? ` (got ${given.map((g) => `--${g}`).join(', ')})` : ''}`,
    );
  switch (given[0]!) {
    case 'nodes':
      return {
        kind: 'nodes',
        nodes: (str(values.nodes) ?? '')
          .split(',')
          .map((n) => n.trim())
          .filter((n) => n !== ''),
      };
    case 'all':
      return { kind: 'all' };
    case 'spec':
      return { kind: 'spec', specDigest: str(values.spec) ?? '' };
    case 'prefix':
      return { kind: 'prefix', prefix: str(values.prefix) ?? '' };
  }
}

/** The spec every target is sent: read from a file (or stdin), or under --as-of each node's own then. */
async function resourcesOf(ctx: Context, file: string): Promise<unknown[]> {
  const spec = await readSpecJson(ctx.io, file);
  const resources = (spec as { resources?: unknown } | null)?.resources;
  if (!Array.isArray(resources)) throw new ConvergeError('CONVERGE_ERR_SPEC_INVALID', `${file} has no "resources" list`);
  return resources;
}

async function start(ctx: Context, what: Readonly<{ file: string } | { asOf: Moment }>): Promise<number> {
  const { values, io, config, json } = ctx;
  const selection = selectionOf(values);
  const waves = str(values.waves) ?? '100%';
  const maxFailures = str(values['max-failures']);
  const abortOn = str(values['abort-on']);
  if (maxFailures !== undefined && abortOn !== undefined) throw usage('give --max-failures or --abort-on, not both');
  const timeout = str(values['wave-timeout']);
  if (timeout === undefined) throw usage('rollout start needs --wave-timeout <duration> (how long a wave may stay behind, like 10m)');
  const waveTimeoutMs = parseDuration('wave-timeout', timeout);
  const pause = str(values.pause);
  const onSuperseded = str(values['on-superseded']);
  if (onSuperseded !== undefined && onSuperseded !== 'fail' && onSuperseded !== 'hold')
    throw usage(`--on-superseded is fail or hold (got ${JSON.stringify(onSuperseded)})`);
  const gateUrl = str(values['gate-url']);
  const gateTimeout = str(values['gate-timeout']);
  if (gateTimeout !== undefined && gateUrl === undefined) throw usage('--gate-timeout goes with --gate-url');
  const rollbackOnHalt = str(values['rollback-on-halt']);
  if (rollbackOnHalt !== undefined && rollbackOnHalt !== 'none' && rollbackOnHalt !== 'wave' && rollbackOnHalt !== 'all')
    throw usage(`--rollback-on-halt is none, wave or all (got ${JSON.stringify(rollbackOnHalt)})`);
  const resources = 'file' in what ? await resourcesOf(ctx, what.file) : [];
  const store = await openStore(config, io);
  try {
    // The selections taken from node states need the fleet: fold the store (an explicit list does not).
    const states = selection.kind === 'nodes' ? [] : [...(await foldStore(store, io)).values()];
    const id = str(values.id);
    const r = await startRollout(
      { store, now: () => new Date(), nodeStates: () => states },
      {
        ...(id === undefined ? {} : { rollout: id }),
        resources,
        ...('asOf' in what ? { asOf: what.asOf } : {}),
        selection,
        waves,
        ...(abortOn === undefined ? { maxFailures: maxFailures ?? '0' } : { abortOn }),
        waveTimeoutMs,
        ...(pause === undefined ? {} : { pauseMs: parseDuration('pause', pause) }),
        ...(onSuperseded === undefined ? {} : { onSuperseded }),
        ...(rollbackOnHalt === undefined ? {} : { rollbackOnHalt }),
        ...meterFlags(values),
        ...(gateUrl === undefined ? {} : { gate: { url: gateUrl, timeoutMs: parseDuration('gate-timeout', gateTimeout ?? '10s') } }),
        startedBy: who(ctx),
      },
    );
    if (json) printJson(io, r);
    else {
      io.stdout(`${r.rollout}\n`);
      io.stderr(
        `rollout ${r.rollout}: ${r.targets} node(s) in ${r.waves.length} wave(s) (${r.waves.join(', ')}); a running converge serve on this store opens the waves.\nwatch it: converge rollout status ${r.rollout} --watch\n`,
      );
    }
    return 0;
  } finally {
    await store.close();
  }
}

/**
 * The failed nodes with their class: those the waves and the halt recorded (timeouts and silent
 * nodes among them), then those failing now in the open wave, then the rollback's, 50 at most.
 */
const failedNodes = (f: FoldedRollouts, id: string): FailedNode[] => {
  const out: FailedNode[] = [];
  const seen = new Set<string>();
  const add = (node: string, wave: number | string, cls: string, detail: string): void => {
    if (seen.has(`${wave}/${node}`) || out.length >= 50) return;
    seen.add(`${wave}/${node}`);
    out.push({ node, wave: String(wave), class: cls, detail });
  };
  const s = f.rollouts.get(id);
  for (const w of s?.waves ?? []) for (const x of w.completed?.failures ?? []) add(x.node, w.wave, x.reason, x.detail);
  if (s?.halted != null) for (const x of s.halted.failed) add(x.node, s.halted.wave, x.reason, x.detail);
  for (const outcome of ['refused', 'degraded', 'unsendable'] as const)
    for (const n of f.rollouts.nodes(id, { outcome, limit: 20 })?.nodes ?? []) add(n.node, n.wave, n.outcome, n.detail ?? '');
  for (const x of f.rollouts.summary(id, Date.now())?.rollback?.failures ?? []) add(x.node, 'rollback', x.reason, x.detail);
  return out;
};

const notFound = (id: string): ConvergeError =>
  new ConvergeError('CONVERGE_ERR_ROLLOUT_NOT_FOUND', `no rollout named ${JSON.stringify(id)}`, { details: { rollout: id } });

async function status(ctx: Context, store: EventStore, id: string): Promise<number> {
  const { io, json, output } = ctx;
  const folded = await foldRollouts(store, io, ctx.config, id);
  const print = (): boolean => {
    const now = Date.now();
    const r = folded.rollouts.summary(id, now);
    if (r === undefined) throw notFound(id);
    printOne(io, output, r, { text: () => rolloutDetail(r, failedNodes(folded, id), now), name: r.rollout });
    return isTerminal(r.status);
  };
  const ended = print();
  if (ctx.values.watch !== true || ended) return 0;
  // --watch: fold what is appended, and print again at most once a second while something changed.
  let changed = false;
  const stop = folded.follow(() => (changed = true));
  try {
    for (;;) {
      const tick = new Promise<'tick'>((r) => setTimeout(() => r('tick'), 1_000).unref());
      if ((await Promise.race([tick, io.interrupted.then(() => 'stop' as const)])) === 'stop') return 0;
      if (!changed) continue;
      changed = false;
      // Each print is a document of its own: JSON lines, YAML documents separated by ---.
      if (output === 'yaml') io.stdout('---\n');
      else if (!json && output !== 'name') io.stdout(io.stderrIsTTY ? '\u001b[H\u001b[2J' : '\n');
      if (print()) return 0;
    }
  } finally {
    await stop();
  }
}

export const run: Run = async (ctx) => {
  const [verb, given] = ctx.positionals as [string, string | undefined];
  if (!(verbs as readonly string[]).includes(verb)) throw usage(`rollout takes ${verbs.join(', ')}, not ${JSON.stringify(verb)}`);
  const v = verb as Verb;
  // Only `start --as-of` goes without its argument (it restores specs instead of reading one).
  const asOf = str(ctx.values['as-of']);
  if (v === 'start' && asOf !== undefined) {
    if (given !== undefined) throw usage('rollout start takes a spec file or --as-of <time|position>, not both');
  } else if (given === undefined)
    throw usage(
      v === 'start' ? 'rollout start needs a spec file (or - for stdin), or --as-of <time|position>' : `rollout ${v} needs a rollout id`,
    );
  const arg = given ?? '';
  if (v !== 'start') {
    for (const f of [
      'nodes',
      'all',
      'spec',
      'prefix',
      'waves',
      'max-failures',
      'abort-on',
      'wave-timeout',
      'pause',
      'on-superseded',
      'rollback-on-halt',
      'id',
      'as-of',
    ])
      if (ctx.values[f] !== undefined && ctx.values[f] !== false) throw usage(`--${f} is for rollout start`);
  }
  if (ctx.values.watch !== undefined && v !== 'status') throw usage('--watch is for rollout status');
  if (ctx.values.reason !== undefined && v !== 'pause' && v !== 'abort' && v !== 'rollback')
    throw usage('--reason is for rollout pause, abort and rollback');
  if (ctx.values.scope !== undefined && v !== 'rollback') throw usage('--scope is for rollout rollback');
  const scope = str(ctx.values.scope);
  if (scope !== undefined && scope !== 'all' && scope !== 'wave') throw usage(`--scope is all or wave (got ${JSON.stringify(scope)})`);
  if (v !== 'status' && v !== 'explain' && ctx.output !== 'text' && ctx.output !== 'json')
    throw usage(`-o ${ctx.output} is for rollout status and explain (the others take --json)`);
  if (v === 'start') return start(ctx, asOf === undefined ? { file: arg } : { asOf: parseMoment(asOf, 'CONVERGE_ERR_USAGE') });
  const { io, config, json } = ctx;
  return withStore(config, io, async (store) => {
    if (v === 'status') return status(ctx, store, arg);
    if (v === 'explain') {
      const x = await explainRollout(store, arg);
      if (ctx.output === 'text' || ctx.output === 'wide') io.stdout(x.entries.map(explainLine).join('\n') + '\n');
      else printList(io, ctx.output, x.entries, { headers: [], row: () => [], name: (e) => e.position });
      return 0;
    }
    const deps = { store, now: () => new Date() };
    const by = who(ctx);
    const reason = str(ctx.values.reason) ?? '';
    const after =
      v === 'pause'
        ? await pauseRollout(deps, arg, { by, reason })
        : v === 'resume'
          ? await resumeRollout(deps, arg, { by })
          : v === 'rollback'
            ? await rollbackRollout(deps, arg, { by, reason, ...(scope === undefined ? {} : { scope }) })
            : await abortRollout(deps, arg, { by, reason });
    if (json) printJson(io, { rollout: after.id, status: after.status, at: after.updatedAt });
    else io.stdout(`rollout ${after.id} ${after.status}\n`);
    if (!json && v === 'rollback')
      io.stderr(`a running converge serve on this store sends the previous specs; watch it: converge rollout status ${after.id} --watch\n`);
    return 0;
  });
};
