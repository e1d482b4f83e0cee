import { join } from 'node:path';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import type { Server } from '../../src/app/server.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import { logger } from '../support/logger.ts';
import { holdGet, silentSocket } from '../support/openStreams.ts';
import type { HeldAnswer } from '../support/openStreams.ts';
import { until } from '../support/until.ts';
import { PACE_MS, startLoad, timeToStore, tally, withNodes } from './scenarios.ts';
import type { Scenario } from './scenarios.ts';

// Connection exhaustion (one read token opened 20,000 event streams, the process
// reached its descriptor limit and every new client, /healthz included, was reset). `serve`'s
// composition over RabbitMQ and SQLite, with the caps set low (streams: 20 per token, 60 in all;
// 300 sockets) and an admin listener, while two nodes report. First the same flood against an
// engine without caps, as the baseline. Then: one token opens 400 streams at once; three more
// tokens open 400 each; then 600 sockets connect and say nothing. Checked: one token holds no more
// than its cap and the engine no more than its own; every refusal is a problem with Retry-After and
// its connection closed; another token gets in while the first is capped; /healthz answers on the
// main listener while the streams are capped and on the admin listener while the sockets are
// exhausted; the silent sockets are closed by the request timeout, after which the main listener
// answers again (time to recover: the end of the socket flood until then); every confirmed report
// is stored once.

const perToken = 20;
const streamsInAll = 60;
const maxConnections = 300;
const requestTimeoutMs = 2_000;
const floodPerToken = 400;
const silentSockets = 600;
/** Sockets besides the held streams the server may still hold: the probes' own kept-alive connections. */
const slack = 5;

const tokens = ['attacker-1', 'attacker-2', 'attacker-3', 'attacker-4', 'operator'].map((t) => `${t}-token-cx`);
const bearer = (t: string): Record<string, string> => ({ authorization: `Bearer ${t}` });

/** Open `n` streams at once with one token; what came back. */
async function flood(base: string, token: string, n: number): Promise<HeldAnswer[]> {
  const settled = await Promise.allSettled(Array.from({ length: n }, () => holdGet(base, '/v1/events', { headers: bearer(token) })));
  return settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
}

const isProblemWithRetry = (a: HeldAnswer): boolean =>
  String(a.headers['content-type']).startsWith('application/problem+json') &&
  /^\d+$/.test(String(a.headers['retry-after'])) &&
  a.headers['connection'] === 'close';

const openFds = async (): Promise<number | null> => {
  try {
    const { readdirSync } = await import('node:fs');
    return readdirSync('/proc/self/fd').length;
  } catch {
    return null;
  }
};

/** Whether `p` settles within `ms` (a bound that only a defect reaches, not a measurement). */
const within = (p: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);

const status = async (url: string): Promise<number> => {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    await r.arrayBuffer();
    return r.status;
  } catch {
    return 0; // reset, refused or no answer
  }
};

export const connectionExhaustion: Scenario = {
  name: 'connection exhaustion',
  faults: `one read token opens ${floodPerToken} event streams at once, three more tokens ${floodPerToken} each, then ${silentSockets} sockets connect and send nothing; caps ${perToken} streams per token, ${streamsInAll} in all, ${maxConnections} sockets; under report load`,
  run: (lab) =>
    withNodes(lab, 'cx', 2, async (nodes) => {
      const path = join(lab.dir, 'exhaustion.db');
      const store = createSqliteEventStore(path);
      const amqp = await createAmqpTransport({ url: lab.engineUrl, logger, connectionName: 'converge-fault-engine' });
      const settings = {
        store: `sqlite:${path}`,
        port: '0',
        logLevel: 'silent',
        apiTokens: tokens.map((t) => `${t}:read`).join(';'),
        adminListen: '127.0.0.1:0',
        maxStreams: String(streamsInAll),
        maxStreamsPerClient: String(perToken),
        maxAwaits: String(streamsInAll),
        maxAwaitsPerClient: String(perToken),
        maxConnections: String(maxConnections),
        requestTimeoutMs: String(requestTimeoutMs),
        idleTimeoutMs: String(requestTimeoutMs),
      } as const;
      const engine = createServer({
        config: loadConfig({ flags: {}, env: {} }, settings),
        logger,
        store,
        transport: { ingestSource: amqp.ingestSource(), publisher: amqp.declarationPublisher() },
        dashboardDir: null,
      });
      // The baseline: the same API over the same store with caps and socket limit out of reach.
      const uncapped: Server = createServer({
        config: loadConfig(
          { flags: {}, env: {} },
          {
            ...settings,
            adminListen: '',
            snapshotPath: join(lab.dir, 'baseline.snapshot.json'),
            maxStreams: '1000000',
            maxStreamsPerClient: '1000000',
            maxAwaits: '1000000',
            maxAwaitsPerClient: '1000000',
            maxConnections: '10000000',
          },
        ),
        logger,
        store,
        dashboardDir: null,
      });
      const held: HeldAnswer[] = [];
      const sockets: Awaited<ReturnType<typeof silentSocket>>[] = [];
      const load = startLoad(nodes, Infinity, PACE_MS);
      try {
        const base = await engine.start();
        const admin = engine.adminUrl()!;
        const fds0 = await openFds();

        // Before: one token, no caps.
        const baselineBase = await uncapped.start();
        const before = await flood(baselineBase, tokens[0]!, floodPerToken);
        const heldBefore = before.filter((a) => a.status === 200).length;
        before.forEach((a) => a.close());
        await uncapped.stop();

        // One token's flood.
        const first = await flood(base, tokens[0]!, floodPerToken);
        held.push(...first.filter((a) => a.status === 200));
        const firstRefused = first.filter((a) => a.status !== 200);
        const operator = await holdGet(base, '/v1/events', { headers: bearer(tokens[4]!) });
        const operatorGotIn = operator.status === 200;
        operator.close();
        const refusedClosed = await within(Promise.all(firstRefused.map((a) => a.ended)), 60_000);

        // Three more tokens: the engine's cap.
        const more = (await Promise.all(tokens.slice(1, 4).map((t) => flood(base, t, floodPerToken)))).flat();
        held.push(...more.filter((a) => a.status === 200));
        const moreRefused = more.filter((a) => a.status !== 200);
        const refusals = [...firstRefused, ...moreRefused];
        const byStatus = new Map<number, number>();
        for (const a of refusals) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
        const mainHealthCapped = await status(`${base}/healthz`);
        const adminHealthCapped = await status(`${admin}/healthz`);
        const metricsText = await (await fetch(`${admin}/metrics`)).text();
        const openStreams = Number(/^converge_http_open\{kind="stream"\} (\d+)$/m.exec(metricsText)?.[1] ?? NaN);
        const fdsCapped = await openFds();

        // Sockets that say nothing, past --max-connections.
        // In batches of 100 at once: quicker than the request timeout even on a busy machine.
        for (let i = 0; i < silentSockets; i += 100)
          sockets.push(...(await Promise.all(Array.from({ length: Math.min(100, silentSockets - i) }, () => silentSocket(base)))));
        const floodEnded = Date.now();
        const adminHealthExhausted = await status(`${admin}/healthz`);
        const adminMetricsExhausted = await status(`${admin}/metrics`);
        const serverConnections = (): Promise<number> => new Promise((r) => engine.app.server.getConnections((_e, n) => r(n)));
        const connections = await serverConnections();
        const dropped = Number(
          /^converge_http_refused_total\{kind="connection",reason="server_cap"\} (\d+)$/m.exec(
            await (await fetch(`${admin}/metrics`)).text(),
          )?.[1] ?? 0,
        );
        const fdsExhausted = await openFds();
        const recoverMs = await until(
          'the main listener to answer /healthz again',
          async () => (await status(`${base}/healthz`)) === 200,
          60_000,
        ).then(
          () => Date.now() - floodEnded,
          () => null,
        );
        // Counted by the server: under load the kernel's accept queue overflows, and a client whose
        // handshake the server never completed believes it is connected until it sends something.
        const silentClosed = await until(
          'the server to close the silent sockets',
          async () => (await serverConnections()) <= held.length + slack,
          60_000,
        ).then(
          () => true,
          () => false,
        );
        const connectionsAfter = await serverConnections();

        // Let go of everything: every place comes back.
        held.forEach((a) => a.close());
        const placesReturned = await until(
          'every place to be returned',
          async () => /^converge_http_open\{kind="stream"\} 0$/m.test(await (await fetch(`${admin}/metrics`)).text()),
          30_000,
        ).then(
          () => true,
          () => false,
        );

        load.finish();
        await load.done;
        const drained = await timeToStore(() => store, load.confirmed());
        const heldByFirst = first.filter((a) => a.status === 200).length;
        return await tally(connectionExhaustion, store, load, recoverMs, {
          hostileTried: floodPerToken * 4 + silentSockets,
          hostileAppended: 0,
          notes: [
            `without caps one token held ${heldBefore} of ${floodPerToken} streams`,
            `with caps: the token held ${heldByFirst}, the four tokens ${held.length} (cap ${perToken} each, ${streamsInAll} in all); refused ${[...byStatus].map(([s, n]) => `${n}× ${s}`).join(', ')}`,
            `capped: main /healthz ${mainHealthCapped}, admin /healthz ${adminHealthCapped}, converge_http_open{kind="stream"} ${openStreams}`,
            `${silentSockets} silent sockets: the main listener held ${connections} (max ${maxConnections}), dropped ${dropped}; admin /healthz ${adminHealthExhausted}, /metrics ${adminMetricsExhausted}; after the ${requestTimeoutMs} ms request timeout the listener held ${connectionsAfter} (the ${held.length} streams and the probes' own)`,
            `every confirmed report stored ${drained} ms after the load ended`,
            `open descriptors of the process (engine and clients): ${fds0} at start, ${fdsCapped} capped, ${fdsExhausted} at the socket flood`,
            'time to recover = end of the socket flood until the main /healthz answers 200',
          ],
          checks: {
            oneTokenHeldItsCap: heldByFirst === perToken,
            engineHeldItsCap: held.length === streamsInAll && openStreams === streamsInAll,
            everyRefusalA429Or503ProblemWithRetryAfter:
              refusals.every((a) => (a.status === 429 || a.status === 503) && isProblemWithRetry(a)) &&
              firstRefused.every((a) => a.status === 429),
            anotherTokenGotIn: operatorGotIn,
            refusedConnectionsClosed: refusedClosed,
            mainProbeAnsweredWhileCapped: mainHealthCapped === 200,
            adminProbesAnsweredWhileExhausted: adminHealthCapped === 200 && adminHealthExhausted === 200 && adminMetricsExhausted === 200,
            socketsBoundedByMaxConnections: connections <= maxConnections && dropped > 0,
            silentSocketsClosed: silentClosed,
            placesReturned,
          },
        });
      } finally {
        load.stop();
        held.forEach((a) => a.close());
        sockets.forEach((s) => s.socket.destroy());
        await uncapped.stop();
        await engine.stop();
        await amqp.close();
        await store.close();
      }
    }),
};
