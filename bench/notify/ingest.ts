// Ingest beside a slow receiver: one pass of reports through the engine's ingest (in-process
// broker → parse → batch → append to SQLite → ack) and the fold, with or without a notifier whose
// one webhook destination takes `holdMs` to answer each request.
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createNotifier, parseNotifyConfig } from '../../src/notify/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { historyInStore } from '../../test/support/history.ts';

export type SlowReceiver = Readonly<{ url: string; requests: () => number; close: () => Promise<void> }>;

/** A webhook that answers 200 to each request `holdMs` after it arrived. */
export async function startSlowReceiver(holdMs: number): Promise<SlowReceiver> {
  let requests = 0;
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      requests++;
      const t = setTimeout(() => {
        timers.delete(t);
        res.writeHead(200).end('ok');
      }, holdMs);
      timers.add(t);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const a = server.address();
  if (a === null || typeof a === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${a.port}/hook`,
    requests: () => requests,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const nodes = 1_000;
const wait = (): Promise<void> => new Promise((r) => setTimeout(r, 2));

/**
 * `reports` reports from 1,000 nodes, each node's alternately a refusal and a success (a refusal
 * flips the node to refused: one `node.refused`). Resolves with reports/s from the first
 * delivery to every report acked and folded.
 */
export async function ingestPass(
  options: Readonly<{ dir: string; pass: number; reports: number; logger: Logger; url?: string }>,
): Promise<{ rate: number }> {
  const { reports, logger, url } = options;
  const store = createSqliteEventStore(join(options.dir, `ingest-${options.pass}-${url === undefined ? 'bare' : 'slow'}.db`), {
    sync: 'thread',
  });
  const broker = createInProcessBroker();
  const runner = createProjectionRunner({ store, logger });
  const notifier =
    url === undefined
      ? null
      : createNotifier({
          config: parseNotifyConfig(
            JSON.stringify({ destinations: [{ name: 'slow', kind: 'webhook', url, timeoutMs: 30_000 }] }),
            'bench.json',
          ),
          store,
          readModel: runner.readModel,
          logger,
        });
  const h = historyInStore(store);
  const ids = Array.from({ length: nodes }, (_, i) => `i${options.pass}-n${i}`);
  const digests: string[] = [];
  for (const id of ids) digests.push((await h.send(id)).digest);
  await notifier?.prepare();
  await runner.start();
  await notifier?.begin();
  await runner.caughtUp();
  const ingest = createIngest({ store, source: broker.ingestSource(), logger });
  await ingest.start();
  const start = performance.now();
  for (let i = 0; i < reports; i++) {
    const n = i % nodes;
    const refused = Math.floor(i / nodes) % 2 === 0 ? 'bench: refused' : '';
    const body = encodeReport({
      node: ids[n]!,
      applied: refused === '' ? ['web'] : [],
      failed: {},
      refused,
      carried: [],
      declared: digests[n]!,
    });
    broker.inject('report', body, { messageId: `${ids[n]}/${i}`, userId: ids[n]! });
  }
  while (ingest.stats().acked < reports) await wait();
  const head = await store.headPosition();
  while (runner.readModel.position() !== head) await wait();
  const rate = reports / ((performance.now() - start) / 1000);
  await ingest.stop();
  await notifier?.stop();
  await runner.stop();
  await store.close();
  return { rate };
}
