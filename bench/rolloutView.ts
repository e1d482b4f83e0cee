// The rollout view's cost on the node fold: the same events folded into a read model
// alone (the baseline) and into a read model with the live rollout view listening
// (src/readModel/rollouts.ts), passes alternating. Two histories: one where a rollout covers
// every node (each report recounts that node's outcome), and one with no rollout (each node
// change costs the view one Map lookup).
// Run: npm run bench -- rolloutView   (CONVERGE_BENCH_SCALE=0.1 for a quick look)
import { createHash } from 'node:crypto';
import { createReadModel } from '../src/readModel/readModel.ts';
import { createRolloutView } from '../src/readModel/rollouts.ts';
import {
  declarationSentId,
  makeRolloutEvent,
  reportReceivedId,
  rolloutSendId,
  rolloutStreamOf,
  streamOf,
} from '../src/core/events/index.ts';
import type { ConvergeEvent, Recorded } from '../src/core/events/index.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const nodes = Math.max(100, Math.round(20_000 * scale));
const rounds = 10;
const passes = 5;
const t0 = Date.parse('2026-11-30T12:00:00Z');
const sig = Buffer.alloc(64, 1).toString('base64');
const decl = Buffer.from('{"node":"x"}').toString('base64');
const digestOf = (s: string): string => createHash('sha256').update(s).digest('hex');

/** Per node: `rounds` sends each followed by a stale and a matching report; with a rollout, its send is the first. */
function build(withRollout: boolean): Recorded[] {
  const out: Recorded[] = [];
  let position = 0n;
  const revisions = new Map<string, bigint>();
  const push = (stream: string, e: { id: string } & ConvergeEvent): void => {
    const revision = (revisions.get(stream) ?? -1n) + 1n;
    revisions.set(stream, revision);
    out.push({ ...e, stream, revision, position: ++position } as Recorded);
  };
  const ids = Array.from({ length: nodes }, (_, i) => `node-${String(i).padStart(6, '0')}`);
  const at = (k: number): string => new Date(t0 + k).toISOString();
  const rollout = 'bench';
  const rstream = rolloutStreamOf(rollout);
  if (withRollout) {
    push(
      rstream,
      makeRolloutEvent('RolloutStarted', {
        rollout,
        resources: [{ id: 'web' }],
        specDigest: digestOf('spec'),
        selection: { kind: 'all' },
        targets: nodes,
        waves: [nodes],
        asGiven: { waves: '100%', maxFailures: '0' },
        maxFailures: 0,
        waveTimeoutMs: 600_000,
        pauseMs: 0,
        startedBy: 'bench',
        startedAt: at(0),
      }),
    );
    for (let from = 0; from < nodes; from += 1_000)
      push(rstream, makeRolloutEvent('RolloutNodesListed', { rollout, from, nodes: ids.slice(from, from + 1_000), listedAt: at(0) }));
    push(rstream, makeRolloutEvent('WaveStarted', { rollout, wave: 1, from: 0, to: nodes, startedAt: at(0) }));
  }
  for (let round = 1; round <= rounds; round++) {
    const sends: { node: string; serial: number; digest: string }[] = [];
    for (const node of ids) {
      const digest = digestOf(`${node}/${round}`);
      const tagged = withRollout && round === 1;
      push(streamOf(node), {
        id: tagged ? rolloutSendId(node, rollout) : declarationSentId(node, round),
        type: 'DeclarationSent',
        data: {
          node,
          serial: round,
          digest,
          specDigest: digestOf(`spec/${round}`),
          declaration: decl,
          signature: sig,
          keyId: 'k',
          resourceIds: ['web'],
          sentAt: at(round * 1000),
          ...(tagged ? { rollout: { id: rollout, wave: 1 } } : {}),
        },
      });
      if (tagged) sends.push({ node, serial: round, digest });
    }
    if (sends.length > 0)
      for (let i = 0; i < sends.length; i += 1_000)
        push(
          rstream,
          makeRolloutEvent(
            'RolloutSent',
            { rollout, wave: 1, sends: sends.slice(i, i + 1_000), skipped: [], sentAt: at(round * 1000) },
            { revision: revisions.get(rstream) ?? -1n },
          ),
        );
    for (const [k, declared] of [digestOf(`x/${round - 1}`), null].entries()) {
      for (const node of ids) {
        const d = declared ?? digestOf(`${node}/${round}`);
        const messageId = `m-${node}-${round}-${k}`;
        push(streamOf(node), {
          id: reportReceivedId(node, messageId, Buffer.alloc(0)),
          type: 'ReportReceived',
          data: {
            node,
            declared: d,
            applied: ['web'],
            failed: {},
            refused: '',
            carried: [],
            receivedAt: at(round * 1000 + 100 + k),
            transport: { messageId, redelivered: false, userId: node },
          },
        });
      }
    }
  }
  return out;
}

function fold(events: readonly Recorded[], withView: boolean): number {
  const model = createReadModel({ now: () => t0 });
  // The projection runner always listens to the read model (the convergence histogram), so every
  // fold in `serve` builds its change notices: the baseline listens too, and does nothing.
  model.onChange(() => {});
  const view = withView ? createRolloutView(model) : null;
  const start = performance.now();
  for (let i = 0; i < events.length; i += 1_000) model.apply(events.slice(i, i + 1_000));
  const ms = performance.now() - start;
  // Every node read the rollout's send, then was sent the later rounds: superseded.
  if (view !== null && view.size().rollouts > 0 && view.summary('bench', t0)?.totals.superseded !== nodes)
    throw new Error('the view did not count every node');
  view?.stop();
  return (events.length / ms) * 1000;
}

const report = createBenchReport(
  'Rollout view on the node fold',
  'Events folded into the read model with the live rollout view (src/readModel/rollouts.ts) listening, against the read model alone (with one listener that does nothing, as the projection runner always has one), same events, passes alternating.',
);
for (const withRollout of [true, false]) {
  const events = build(withRollout);
  const converge: number[] = [];
  const baseline: number[] = [];
  fold(events, true);
  fold(events, false);
  for (let p = 0; p < passes; p++) {
    baseline.push(fold(events, false));
    converge.push(fold(events, true));
  }
  report.row({
    name: withRollout
      ? `fold, one rollout over all ${nodes.toLocaleString('en-US')} nodes (${events.length.toLocaleString('en-US')} events)`
      : `fold, no rollout (${events.length.toLocaleString('en-US')} events)`,
    unit: 'events/s',
    converge,
    baseline,
    goal: { ratioAtLeast: 0.9 },
    notes: withRollout
      ? 'the rollout sends round 1; every later change of every node recounts its outcome'
      : 'a Map lookup per node change',
  });
}
report.end();
