// API benchmark (docs/design.md §7): GET /v1/nodes/:node on a read model of 10,000 nodes
// under concurrent load, beside a bare fastify route on the same server returning a stored
// object (no auth, no view, no zod) — the floor fastify itself sets. Same client, same run, in
// short passes that alternate between the two (the machine is shared: a burst of someone
// else's work lands on both sides), each figure the best pass with the spread. CPU time per
// request (server and client share this process) is the steadiest figure on a busy machine.
// Run: npm run bench -- api   (CONVERGE_BENCH_SCALE=0.2 for a quick look)
import { createHash } from 'node:crypto';
import { Agent, request } from 'node:http';
import pino from 'pino';
import { nodeView } from '../projections/index.ts';
import { buildApp, parseApiTokens } from '../src/api/index.ts';
import { createReadModel } from '../src/readModel/readModel.ts';
import { aliveSeenId, declarationSentId, reportReceivedId, streamOf } from '../src/core/events/index.ts';
import type { Recorded } from '../src/core/events/index.ts';
import { createMemoryEventStore } from '../src/store/memoryEventStore.ts';
import { createBenchReport } from './support/report.ts';

const scale = Number(process.env.CONVERGE_BENCH_SCALE ?? 1);
const requests = Math.round(40_000 * scale);
const passes = 8;
const perPass = Math.max(1, Math.round(requests / passes));
const maxSeconds = 20;
const concurrency = 32;
const nodes = 10_000;
const token = 'bench-token-0123456789';

// A read model of 10,000 nodes, each sent a declaration, reporting it, alive.
const readModel = createReadModel();
const t0 = Date.now() - 5_000;
let position = 0n;
const rec = (e: Omit<Recorded, 'position' | 'revision' | 'stream'>, node: string, revision: bigint): Recorded =>
  ({ ...e, stream: streamOf(node), revision, position: ++position }) as Recorded;
for (let i = 0; i < nodes; i++) {
  const node = `n${i}`;
  const digest = createHash('sha256').update(node).digest('hex');
  const at = new Date(t0 + i).toISOString();
  readModel.apply([
    rec(
      {
        id: declarationSentId(node, 1),
        type: 'DeclarationSent',
        data: { node, serial: 1, digest, specDigest: digest, declaration: '', signature: '', keyId: 'k', resourceIds: ['web'], sentAt: at },
      },
      node,
      0n,
    ),
    rec(
      {
        id: reportReceivedId(node, 'm', Buffer.alloc(0)),
        type: 'ReportReceived',
        data: {
          node,
          declared: digest,
          applied: ['web'],
          failed: {},
          refused: '',
          carried: [],
          receivedAt: at,
          transport: { messageId: 'm', redelivered: false, userId: node },
        },
      },
      node,
      1n,
    ),
    rec({ id: aliveSeenId(node, at), type: 'AliveSeen', data: { node, seenAt: at } }, node, 2n),
  ]);
}
const stored = new Map([...readModel.nodes()].map((s) => [s.node, nodeView(s, Date.now())]));

const app = buildApp({
  readModel,
  store: createMemoryEventStore(),
  logger: pino({ level: 'silent' }),
  tokens: parseApiTokens(`${token}:read`).table,
});
app.get('/bare/:node', async (req) => stored.get((req.params as { node: string }).node));
const base = new URL(await app.listen({ port: 0, host: '127.0.0.1' }));
const agent = new Agent({ keepAlive: true, maxSockets: concurrency });

function get(path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, path, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

type Pass = { rps: number; p50: number; p99: number; cpuUs: number };

/** `concurrency` loops issuing `count` requests (or until `maxSeconds` pass). */
async function load(name: string, count: number, path: (i: number) => string, headers: Record<string, string>): Promise<Pass> {
  const latencies: number[] = [];
  let next = 0;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const deadline = start + maxSeconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count && performance.now() < deadline) {
        const i = next++;
        const s = performance.now();
        const status = await get(path(i), headers);
        latencies.push(performance.now() - s);
        if (status !== 200) throw new Error(`${name}: HTTP ${status}`);
      }
    }),
  );
  const secs = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const pct = (p: number): number => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] ?? NaN;
  return { rps: latencies.length / secs, p50: pct(50), p99: pct(99), cpuUs: (cpu.user + cpu.system) / latencies.length };
}

const pick = (i: number): string => `n${(i * 7919) % nodes}`;
const auth = { authorization: `Bearer ${token}` };
const bareRun = (count: number): Promise<Pass> => load('bare', count, (i) => `/bare/${pick(i)}`, {});
const apiRun = (count: number): Promise<Pass> => load('api', count, (i) => `/v1/nodes/${pick(i)}`, auth);
// Warm both paths (JIT, sockets) before measuring.
await bareRun(perPass);
await apiRun(perPass);
const bare: Pass[] = [];
const api: Pass[] = [];
for (let p = 0; p < passes; p++) {
  // Alternate which side goes first, so neither always follows the other's garbage.
  if (p % 2 === 0) {
    bare.push(await bareRun(perPass));
    api.push(await apiRun(perPass));
  } else {
    api.push(await apiRun(perPass));
    bare.push(await bareRun(perPass));
  }
}
const of = (ps: Pass[], k: keyof Pass): number[] => ps.map((x) => x[k]);
const report = createBenchReport(
  'API: GET /v1/nodes/:node',
  `A read model of ${nodes.toLocaleString('en-US')} nodes behind the real API (auth, view, schemas), ${concurrency} concurrent ` +
    `keep-alive clients, ${passes} alternating passes of ${perPass.toLocaleString('en-US')} requests per side, against a bare ` +
    'fastify route on the same server returning a stored object (no auth, no view, no zod): the floor fastify itself sets.',
);
report.row({ name: 'throughput', unit: 'req/s', converge: of(api, 'rps'), baseline: of(bare, 'rps') });
report.row({
  name: 'CPU per request (server and client)',
  unit: 'µs',
  better: 'lower',
  converge: of(api, 'cpuUs'),
  baseline: of(bare, 'cpuUs'),
});
report.row({ name: 'latency p50', unit: 'ms', better: 'lower', converge: of(api, 'p50'), baseline: of(bare, 'p50') });
report.row({ name: 'latency p99', unit: 'ms', better: 'lower', converge: of(api, 'p99'), baseline: of(bare, 'p99') });
report.end();
agent.destroy();
await app.close();
