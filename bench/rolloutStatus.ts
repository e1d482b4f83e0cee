// `converge rollout status <id>` and `converge rollouts` over a SQLite store of 100,000 nodes with
// a rollout over all of them: each command timed from spawn to exit, without and with the
// engine's snapshot beside the store, passes alternating. With BENCH_CLI_ROOTS=a,b the same
// commands run from two checkouts (their src/ through tsx) on the same store, alternating, so a
// change is measured against the code before it in one run.
//   npm run bench -- rolloutStatus     BENCH_NODES=100000; BENCH_ROLLOUT_STORE=<path> keeps and reuses the built store
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSigningKey } from '../src/core/declaration/index.ts';
import {
  makeAliveSeen,
  makeDeclarationSent,
  makeReportReceived,
  makeRolloutEvent,
  rolloutStreamOf,
  streamOf,
} from '../src/core/events/index.ts';
import { encodeReport } from '../src/core/wire/index.ts';
import { createSqliteEventStore } from '../src/store/sqlite/sqliteEventStore.ts';
import { createBenchReport } from './support/report.ts';
import { writeServeSnapshot } from './support/serveSnapshot.ts';
import type { NewEvent, StreamWrite } from '../src/store/index.ts';

const root = new URL('..', import.meta.url).pathname;
const nodeCount = Number(process.env['BENCH_NODES'] ?? 100_000);
const keep = process.env['BENCH_ROLLOUT_STORE'];
const roots = (process.env['BENCH_CLI_ROOTS'] ?? root).split(',').filter((r) => r !== '');
const passes = Math.max(1, Number(process.env['BENCH_PASSES'] ?? 3));
const dir = mkdtempSync(join(tmpdir(), 'converge-bench-rollout-status-'));
const rollout = 'fleetwide';
/** Rounds of history before the rollout: a send to every node and its report. */
const history = Math.max(0, Number(process.env['BENCH_HISTORY_ROUNDS'] ?? 0));

/** Per node: a send, an alive, its report, an alive, BENCH_HISTORY_ROUNDS sends and reports; then a rollout to every node, 90% of them converged on it. */
async function build(path: string): Promise<void> {
  const store = createSqliteEventStore(path);
  const key = generateSigningKey();
  const nodes = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(6, '0')}`);
  const digests = new Map<string, string>();
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const tick = (): Date => new Date((clock += 1));
  const report = (node: string, i: number, tag: string): NewEvent => {
    const r = { node, applied: ['web'], failed: {}, refused: '', carried: [], declared: digests.get(node)! };
    return makeReportReceived(r, encodeReport(r), { messageId: `m-${tag}-${i}`, redelivered: false, userId: node }, tick());
  };
  const each = async (
    make: (node: string, i: number) => NewEvent | null,
    extra?: (from: number, to: number) => StreamWrite[],
  ): Promise<void> => {
    for (let i = 0; i < nodes.length; i += 1_000) {
      const writes: StreamWrite[] = [];
      for (let j = i; j < Math.min(i + 1_000, nodes.length); j++) {
        const e = make(nodes[j]!, j);
        if (e !== null) writes.push({ stream: streamOf(nodes[j]!), expected: 'any', events: [e] });
      }
      await store.append([...writes, ...(extra?.(i, Math.min(i + 1_000, nodes.length)) ?? [])]);
    }
  };
  await each((node, i) => {
    const e = makeDeclarationSent({ node, serial: 1, resources: [{ id: 'web', image: `web:${i % 10}` }], key, now: tick() });
    digests.set(node, e.data.digest);
    return e;
  });
  await each((node) => makeAliveSeen({ node }, tick()));
  await each((node, i) => report(node, i, 'a'));
  await each((node) => makeAliveSeen({ node }, tick()));
  for (let round = 0; round < history; round++) {
    await each((node) => {
      const e = makeDeclarationSent({ node, serial: 2 + round, resources: [{ id: 'web', image: `web:${round}` }], key, now: tick() });
      digests.set(node, e.data.digest);
      return e;
    });
    await each((node, i) => report(node, i, `h${round}`));
  }
  const rstream = rolloutStreamOf(rollout);
  const r = (events: NewEvent[]): StreamWrite => ({ stream: rstream, expected: 'any', events });
  const startedAt = tick().toISOString();
  await store.append([
    r([
      makeRolloutEvent('RolloutStarted', {
        rollout,
        resources: [{ id: 'web', image: 'web:next' }],
        specDigest: 'f'.repeat(64),
        selection: { kind: 'all' },
        targets: nodeCount,
        waves: [nodeCount],
        asGiven: { waves: '100%', maxFailures: '0' },
        maxFailures: 0,
        waveTimeoutMs: 3_600_000,
        pauseMs: 0,
        startedBy: 'bench',
        startedAt,
      }),
    ]),
  ]);
  for (let from = 0; from < nodeCount; from += 1_000)
    await store.append([
      r([makeRolloutEvent('RolloutNodesListed', { rollout, from, nodes: nodes.slice(from, from + 1_000), listedAt: startedAt })]),
    ]);
  await store.append([r([makeRolloutEvent('WaveStarted', { rollout, wave: 1, from: 0, to: nodeCount, startedAt })])]);
  await each(
    (node) => {
      const e = makeDeclarationSent({
        node,
        serial: 2 + history,
        resources: [{ id: 'web', image: 'web:next' }],
        key,
        now: tick(),
        rollout: { id: rollout, wave: 1 },
      });
      digests.set(node, e.data.digest);
      return e;
    },
    (from, to) => [
      r([
        makeRolloutEvent(
          'RolloutSent',
          {
            rollout,
            wave: 1,
            sends: nodes.slice(from, to).map((node) => ({ node, serial: 2 + history, digest: digests.get(node)! })),
            skipped: [],
            sentAt: new Date(clock).toISOString(),
          },
          { revision: BigInt(from) },
        ),
      ]),
    ],
  );
  await each((node, i) => (i % 10 === 9 ? null : report(node, i, 'b')));
  await each((node) => makeAliveSeen({ node }, tick()));
  await store.close();
}

/** A CLI command from `tree`'s src/ over the store, timed from spawn to exit; its CPU time (user + system) as /usr/bin/time counts it. */
async function cli(
  tree: string,
  args: readonly string[],
  storePath: string,
): Promise<{ ms: number; cpuMs: number; code: number | null; out: string }> {
  const t0 = performance.now();
  const script = `import(${JSON.stringify(join(tree, 'src/cli/main.ts'))}).then((m) => m.main())`;
  const timeFile = join(dir, 'time.txt');
  const node = [
    process.execPath,
    '--import',
    'tsx',
    '-e',
    script,
    '--',
    'converge',
    ...args,
    '--store',
    `sqlite:${storePath}`,
    '-o',
    'json',
  ];
  const proc = spawn('/usr/bin/time', ['-f', '%U %S', '-o', timeFile, ...node], { cwd: tree, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const code = await new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
  const ms = performance.now() - t0;
  const [user, sys] = readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
  return { ms, cpuMs: ((user ?? NaN) + (sys ?? NaN)) * 1000, code, out };
}

const storePath = keep ?? join(dir, 'store.db');
if (!existsSync(storePath)) {
  const t = performance.now();
  await build(storePath);
  console.error(`built ${storePath} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
}
const snapPath = join(dir, 'engine.snapshot');
await writeServeSnapshot(storePath, snapPath);
const commands: [string, string[]][] = [
  ['rollout status', ['rollout', 'status', rollout]],
  ['rollouts', ['rollouts']],
];
const times = new Map<string, number[]>();
const outputs = new Map<string, string>();
const cpus = new Map<string, number[]>();
for (let pass = 0; pass < passes; pass++)
  for (const [label, args] of commands)
    for (const withSnapshot of [false, true])
      for (const tree of roots) {
        // The default snapshot path is beside the SQLite file: present or not decides the run.
        const beside = `${storePath}.snapshot`;
        if (withSnapshot) copyFileSync(snapPath, beside);
        else rmSync(beside, { force: true });
        const r = await cli(tree, args, storePath);
        if (r.code !== 0) throw new Error(`${label} from ${tree}: exit ${r.code}: ${r.out.slice(-500)}`);
        const key = `${label}|${withSnapshot ? 'snapshot' : 'no snapshot'}|${tree}`;
        times.set(key, [...(times.get(key) ?? []), r.ms]);
        cpus.set(key, [...(cpus.get(key) ?? []), r.cpuMs]);
        outputs.set(key, r.out);
        console.error(`${key}: ${r.ms.toFixed(0)} ms wall, ${r.cpuMs.toFixed(0)} ms CPU`);
      }
rmSync(`${storePath}.snapshot`, { force: true });
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
for (const [key, xs] of times) {
  const cpu = cpus.get(key) ?? [];
  console.log(
    `${key}\twall median ${median(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(', ')})\tCPU median ${median(cpu).toFixed(0)} ms (${cpu.map((x) => x.toFixed(0)).join(', ')})`,
  );
}
console.log(
  `load average at the end: ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
if (keep === undefined) rmSync(dir, { recursive: true, force: true });
// The trees must answer alike (but for the estimate, which moves with the clock).
const shape = (s: string): string => s.replace(/"eta":\{[^}]*\}/g, '"eta":{}');
for (const [label] of commands)
  for (const snap of ['snapshot', 'no snapshot']) {
    const answers = new Set(roots.map((tree) => shape(outputs.get(`${label}|${snap}|${tree}`) ?? '')));
    console.log(`${label} (${snap}): ${answers.size === 1 ? 'the same answer from every tree' : 'ANSWERS DIFFER'}`);
  }

// BENCHMARKS.md: this checkout's (the first root's) CPU per command, without a snapshot (the
// rollout's streams and its targets' read, src/readModel/rolloutSlice.ts) against with one.
const report = createBenchReport(
  'Rollout reads from the CLI',
  `\`converge rollout status <id>\` and \`converge rollouts\` over a SQLite store of ${nodeCount.toLocaleString('en-US')} nodes with one rollout over all of them ` +
    `(${history} extra send/report rounds a node), each a fresh process (tsx) timed from spawn to exit: without a snapshot (the rollouts' streams and each target's stream from the end, docs/cli.md "Rollout reads") ` +
    `against with the engine's snapshot beside the store, ${passes} alternating passes. CPU time, since the machine is shared.`,
);
for (const [label] of commands) {
  const cpuOf = (snap: string): number[] => (cpus.get(`${label}|${snap}|${roots[0]}`) ?? []).map((ms) => ms / 1000);
  const wallOf = (snap: string): number => median(times.get(`${label}|${snap}|${roots[0]}`) ?? []) / 1000;
  report.row({
    name: `${label}: no snapshot, against a trusted snapshot`,
    unit: 's',
    better: 'lower',
    converge: cpuOf('no snapshot'),
    baseline: cpuOf('snapshot'),
    notes: `CPU seconds; wall median ${wallOf('no snapshot').toFixed(1)} s against ${wallOf('snapshot').toFixed(1)} s`,
  });
}
report.end();
