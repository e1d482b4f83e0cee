import { timeline } from '../../projections/index.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { logger } from './logger.ts';
import { until } from './until.ts';

// The archived-sends tests of both stores (test/store/sqliteArchivedSends.test.ts,
// postgresArchivedSends.test.ts): reports from `node` naming each of `digests`, through ingest and
// the fold, and how the node's timeline classes each (`stale` for a send the archive holds).

export async function classesOfReports(
  store: EventStore,
  node: string,
  digests: readonly string[],
): Promise<[string | null, number | null][]> {
  const broker = createInProcessBroker();
  const ingest = createIngest({ store, source: broker.ingestSource(), logger, flushMs: 1, knownSends: () => undefined });
  await ingest.start();
  digests.forEach((declared, i) =>
    broker.inject('report', encodeReport({ node, applied: [], failed: {}, refused: '', carried: [], declared }), {
      messageId: `m${i + 1}`,
      userId: node,
    }),
  );
  const reports = async () => (await store.readStream(streamOf(node))).filter((e) => e.type === 'ReportReceived');
  await until(`${digests.length} reports stored`, async () => (await reports()).length === digests.length);
  await ingest.stop();
  const t = timeline(node, await store.readStream(streamOf(node))).entries.filter((e) => e.type === 'ReportReceived');
  return t.map((e) => [e.class, e.serial]);
}
