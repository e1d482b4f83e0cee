import { join } from 'node:path';
import { buildApp, parseApiTokens } from '../../src/api/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { defaultMaxEventBytes } from '../../src/store/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { logger } from '../support/logger.ts';
import { fullUpload } from '../support/rawHttp.ts';
import { sleep, until } from '../support/until.ts';
import { PACE_MS, PER_NODE, readStored, startEngine, startLoad, tally, timeToStore, withNodes } from './scenarios.ts';
import type { Scenario } from './scenarios.ts';

// Hostile HTTP clients against the API of an engine that is ingesting
// reports over the real broker: eight clients with no valid token push 4 MiB bodies as fast as
// the socket takes them (before the fix each body was read and parsed before the token was
// checked: another client's median went from ~3–10 ms to ~409 ms and RSS grew 116 MiB), beside
// the other requests the API must refuse with a problem: a declaration over the store's event
// limit, a GET with a body, a POST of text/plain, JSON nested 200 deep, a 5,000-character
// path. Checked: no body of a client without a valid token reaches the parser; every hostile
// request is refused with its status (or its connection closed by the server mid-upload); no
// declaration is sent; every confirmed report is stored once. A victim client's latency and the
// process's RSS are measured and noted, never asserted (the machine is shared).

const attackers = 8;
const attackMs = Number(process.env['CONVERGE_FAULT_HTTP_ATTACK_MS'] ?? 3_000);
const mib4 = 4 * 1024 * 1024;
const readToken = 'hostile-http-reader';
const sendToken = 'hostile-http-sender';

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** GET one node's state in a loop until `stop`; the latencies, in ms. */
async function victim(base: string, node: string, stop: () => boolean): Promise<number[]> {
  const out: number[] = [];
  while (!stop()) {
    const t0 = performance.now();
    const r = await fetch(`${base}/v1/nodes/${node}`, { headers: { authorization: `Bearer ${readToken}` } });
    await r.arrayBuffer();
    out.push(performance.now() - t0);
  }
  return out;
}

type Answer = Readonly<{ status: number; problem: boolean; closedByServer: boolean }>;
type Probe = Readonly<{ what: string; want: number; send: (base: string) => Promise<Answer> }>;

const isProblem = (type: string | null): boolean => (type ?? '').startsWith('application/problem+json');
const answer = async (r: Response): Promise<Answer> => {
  await r.arrayBuffer();
  return { status: r.status, problem: isProblem(r.headers.get('content-type')), closedByServer: false };
};
/** Refused as wanted; a server that closes mid-upload may reset the connection before its answer is read. */
const refused = (a: Answer, want: number): boolean => (a.status === want && a.problem) || (a.status === 0 && a.closedByServer);
const post = (base: string, headers: Record<string, string>, body: string): Promise<Response> =>
  fetch(`${base}/v1/nodes/hostile-target/declarations`, { method: 'POST', headers, body });

const probes: readonly Probe[] = [
  {
    what: 'a declaration over the store event limit',
    want: 413,
    send: async (base) => {
      const r = await fullUpload(base, {
        method: 'POST',
        path: '/v1/nodes/hostile-target/declarations',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${sendToken}` },
        declaredBytes: defaultMaxEventBytes + 1,
      });
      return { status: r.status, problem: isProblem(r.contentType), closedByServer: r.closedByServer };
    },
  },
  {
    what: 'a GET with a body',
    want: 413,
    send: async (base) => {
      const r = await fullUpload(base, {
        method: 'GET',
        path: '/v1/fleet',
        headers: { authorization: `Bearer ${readToken}` },
        declaredBytes: mib4,
      });
      return { status: r.status, problem: isProblem(r.contentType), closedByServer: r.closedByServer };
    },
  },
  {
    what: 'a POST of text/plain',
    want: 415,
    send: async (base) => answer(await post(base, { authorization: `Bearer ${sendToken}` }, '{"resources":[]}')),
  },
  {
    what: 'JSON nested 200 levels',
    want: 400,
    send: async (base) =>
      answer(
        await post(
          base,
          { authorization: `Bearer ${sendToken}`, 'content-type': 'application/json' },
          `{"resources":[{"id":"a","x":${'['.repeat(200)}${']'.repeat(200)}}]}`,
        ),
      ),
  },
  {
    what: 'a 5,000-character path segment',
    want: 414,
    send: async (base) =>
      answer(await fetch(`${base}/v1/nodes/${'x'.repeat(5_000)}`, { headers: { authorization: `Bearer ${readToken}` } })),
  },
];

export const hostileHttp: Scenario = {
  name: 'hostile HTTP clients',
  faults:
    '8 clients without a valid token upload 4 MiB bodies in a loop; a declaration over the event limit, a GET with a body, a POST of text/plain, JSON nested 200 deep, a 5,000-character path; under report load',
  run: (lab) =>
    withNodes(lab, 'hh', 2, async (nodes) => {
      const store = createSqliteEventStore(join(lab.dir, 'hostile-http.db'));
      const engine = await startEngine(lab.engineUrl, store);
      const metrics = createMetrics();
      const runner = createProjectionRunner({ store, logger, metrics });
      let sendsReached = 0;
      let parsedWithoutToken = 0;
      const app = buildApp({
        readModel: runner.readModel,
        store,
        logger,
        tokens: parseApiTokens(`${readToken}:read;${sendToken}:read,send`).table,
        projections: runner,
        metrics,
        send: async () => {
          sendsReached++;
          throw new Error('no hostile request may reach the sender');
        },
      });
      // Counts every request body that reaches parsing without the send token: must stay 0
      // (preParsing runs for bodyless requests too, such as the victim's GETs: those are not bodies).
      app.addHook('preParsing', async (req) => {
        const body = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
        if (body && req.headers.authorization !== `Bearer ${sendToken}`) parsedWithoutToken++;
      });
      try {
        await runner.start();
        const base = await app.listen({ port: 0, host: '127.0.0.1' });
        const load = startLoad(nodes, PER_NODE, PACE_MS);
        const victimNode = nodes[0]!.node;
        await until('the victim node to be known', () => runner.readModel.get(victimNode) !== undefined);

        let phase: 'quiet' | 'attack' | 'done' = 'quiet';
        const rss0 = process.memoryUsage().rss;
        const quiet = victim(base, victimNode, () => phase !== 'quiet');
        await sleep(1_000);
        phase = 'attack';
        const underAttack = victim(base, victimNode, () => phase !== 'attack');
        let rssPeak = rss0;
        const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 50);
        const statuses = new Map<number, number>();
        let uploads = 0;
        let refusedUploads = 0;
        const attackEnds = Date.now() + attackMs;
        await Promise.all(
          Array.from({ length: attackers }, async (_, i) => {
            while (Date.now() < attackEnds) {
              const r = await fullUpload(base, {
                method: 'POST',
                path: `/v1/nodes/victim-${i}/declarations`,
                headers: { 'content-type': 'application/json', ...(i % 2 === 0 ? {} : { authorization: 'Bearer not-a-valid-token' }) },
                declaredBytes: mib4,
              });
              uploads++;
              statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
              if (refused({ status: r.status, problem: isProblem(r.contentType), closedByServer: r.closedByServer }, 401)) refusedUploads++;
            }
          }),
        );
        const probeResults = await Promise.all(probes.map(async (p) => ({ p, r: await p.send(base) })));
        phase = 'done';
        clearInterval(sampler);
        const [quietMs, attackLatencies] = await Promise.all([quiet, underAttack]);

        await load.done;
        const recover = await timeToStore(() => store, load.confirmed());
        const { reportsByStream } = await readStored(store);
        let declarations = 0;
        for await (const batch of store.readAll()) for (const e of batch) if (e.type === 'DeclarationSent') declarations++;

        const wrongProbes = probeResults.filter(({ p, r }) => !refused(r, p.want));
        const statusText = [...statuses]
          .map(([s, n]) => `${n}× ${s === 0 ? 'closed by the server before an answer was read' : s}`)
          .join(', ');
        return await tally(hostileHttp, store, load, recover, {
          hostileTried: uploads + probes.length,
          hostileAppended: sendsReached + declarations,
          notes: [
            `${uploads} unauthenticated 4 MiB uploads: ${statusText}`,
            `victim GET /v1/nodes/:node median ${median(quietMs).toFixed(1)} ms before, ${median(attackLatencies).toFixed(1)} ms during the attack (${attackLatencies.length} requests)`,
            `RSS +${((rssPeak - rss0) / 2 ** 20).toFixed(0)} MiB at peak (server and clients share the process)`,
            ...probeResults.map(({ p, r }) => `${p.what}: ${r.status}`),
            `${[...reportsByStream.values()].reduce((a, b) => a + b, 0)} reports stored meanwhile`,
          ],
          checks: {
            noUnauthenticatedBodyParsed: parsedWithoutToken === 0,
            everyUploadRefused401: refusedUploads === uploads,
            everyHostileRequestAnsweredWithItsProblem: wrongProbes.length === 0,
          },
        });
      } finally {
        await app.close();
        await runner.stop();
        await engine.stop();
        await store.close();
      }
    }),
};
