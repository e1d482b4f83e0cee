import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldNodeEvents, timeline } from '../../projections/index.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { ReportReceived } from '../../src/core/events/index.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { historyInStore } from '../support/history.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// A report naming a declaration sent long ago: ingest looks the digest up in the store and records
// what it found, so the pure fold tells stale (ever sent to this node) from unknown (never sent).

const report = (node: string, declared: string | null): Buffer =>
  encodeReport({ node, applied: [], failed: {}, refused: '', carried: [], declared });

async function storedReports(store: EventStore, node: string) {
  return (await store.readStream(streamOf(node))).filter((e): e is typeof e & ReportReceived => e.type === 'ReportReceived');
}

test('a node sent 20 declarations reporting the first: stored with the send it names, folded stale with serial 1; a digest never sent stays unknown', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const sends = [];
  for (let i = 0; i < 20; i++) sends.push(await h.send('slow', [{ id: `r${i}` }]));
  const lookups: string[] = [];
  const counted: EventStore = {
    ...store,
    findSend: async (node, digest) => {
      lookups.push(digest);
      return store.findSend(node, digest);
    },
  };
  const broker = createInProcessBroker();
  // The read model as the engine has it: the node's state folded from the store.
  const known = new Map([['slow', foldNodeEvents('slow', await store.readStream(streamOf('slow')))]]);
  const ingest = createIngest({ store: counted, source: broker.ingestSource(), logger, flushMs: 1, knownSends: (n) => known.get(n) });
  await ingest.start();
  const never = 'e'.repeat(64);
  broker.inject('report', report('slow', sends[0]!.digest), { messageId: 'm1', userId: 'slow' });
  broker.inject('report', report('slow', sends[19]!.digest), { messageId: 'm2', userId: 'slow' });
  broker.inject('report', report('slow', never), { messageId: 'm3', userId: 'slow' });
  broker.inject('report', report('slow', sends[0]!.digest), { messageId: 'm4', userId: 'slow' });
  await until('four reports stored', async () => (await storedReports(store, 'slow')).length === 4);
  await ingest.stop();

  const reports = await storedReports(store, 'slow');
  const first = reports[0]!.data.sentEarlier;
  assert.equal(first?.serial, 1);
  assert.equal(reports[1]!.data.sentEarlier, undefined, 'the latest send: nothing to look up');
  assert.equal(reports[2]!.data.sentEarlier, null, 'never sent to this node');
  assert.equal(reports[3]!.data.sentEarlier?.serial, 1);
  assert.deepEqual(lookups, [sends[0]!.digest, never, sends[0]!.digest], 'looked up only for a digest other than the latest');

  const events = await store.readStream(streamOf('slow'));
  const t = timeline('slow', events).entries.filter((e) => e.type === 'ReportReceived');
  assert.deepEqual(
    t.map((e) => [e.class, e.serial]),
    [
      ['stale', 1],
      ['matching', 20],
      ['unknown', null],
      ['stale', 1],
    ],
  );
  assert.deepEqual(foldNodeEvents('slow', events).anomalies, { stale: 2, unknown: 1, undeclared: 0 });
});

test('a lookup that fails leaves the report stored without the field, folded as before', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const sends = [];
  for (let i = 0; i < 10; i++) sends.push(await h.send('n1', [{ id: `r${i}` }]));
  const failing: EventStore = {
    ...store,
    findSend: async () => {
      throw new Error('store away');
    },
  };
  const broker = createInProcessBroker();
  const ingest = createIngest({ store: failing, source: broker.ingestSource(), logger, flushMs: 1, knownSends: () => undefined });
  await ingest.start();
  broker.inject('report', report('n1', sends[0]!.digest), { messageId: 'm1', userId: 'n1' });
  await until('the report stored', async () => (await storedReports(store, 'n1')).length === 1);
  await ingest.stop();
  const [r] = await storedReports(store, 'n1');
  assert.equal(r!.data.sentEarlier, undefined);
  assert.equal(foldNodeEvents('n1', await store.readStream(streamOf('n1'))).reported?.class, 'unknown');
});
