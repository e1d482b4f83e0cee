import { setImmediate as nextTurn } from 'node:timers/promises';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createIngest } from '../../src/engine/ingest/index.ts';
import type { Ingest } from '../../src/engine/ingest/index.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import type { Delivery, IngestSource } from '../../src/transport/port.ts';
import { encodeAlive, encodeReport } from '../../src/core/wire/index.ts';
import type { Report } from '../../src/core/wire/index.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';

// Ingest against a hand-made IngestSource, for the corners a broker cannot be made to hit on cue.

test('stop returns while a dead-letter publish waits for a channel that only the source stop ends', async () => {
  // The AMQP source's deadLetter waits for its dead-letter channel (dead.current()) while the
  // broker is away, and only source.stop() rejects that wait. ingest.stop must not wait for the
  // dead-letter forever before stopping the source: SIGTERM during a broker outage hung serve.
  let onDelivery: ((d: Delivery) => void) | null = null;
  let stopped = false;
  const waiting: Array<(e: Error) => void> = [];
  const acked: Delivery[] = [];
  const source: IngestSource = {
    start: async (f) => {
      onDelivery = f;
    },
    ack: (ds) => {
      if (!stopped) acked.push(...ds);
    },
    isLive: () => !stopped,
    deadLetter: () => new Promise<void>((_resolve, reject) => waiting.push(reject)),
    reject: () => {},
    pause: async () => {},
    stop: async () => {
      stopped = true;
      for (const reject of waiting.splice(0)) reject(new Error('dead-letter channel stopped'));
    },
  };
  const ingest = createIngest({
    store: createMemoryEventStore(),
    source,
    logger,
    flushMs: 1,
    retry: { minMs: 5, maxMs: 20 },
  });
  await ingest.start();
  onDelivery!({
    kind: 'report',
    body: Buffer.from('not json'),
    messageId: 'm1',
    userId: 'n1',
    redelivered: false,
    routingKey: 'report',
    handle: 1,
  });
  assert.equal(waiting.length, 1, 'the refused delivery is being dead-lettered');

  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    ingest.stop().then(() => 'stopped'),
    new Promise<string>((r) => (timer = setTimeout(() => r('still waiting'), 8_000))),
  ]);
  clearTimeout(timer);
  assert.equal(outcome, 'stopped');
  assert.equal(stopped, true);
  assert.deepEqual(acked, [], 'a delivery whose dead-letter copy was never confirmed is not acked');
});

const reportOf = (node: string, over: Partial<Report> = {}): Buffer =>
  encodeReport({ node, applied: [], failed: {}, refused: '', carried: [], declared: null, ...over });

async function settle(ingest: Ingest, done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(done(), `ingest settled: ${JSON.stringify(ingest.stats())}`);
}

test("a node over its budget has the excess refused to mesh.dead with CONVERGE_ERR_RATE_LIMITED; the other nodes' reports are all stored", async () => {
  const broker = createInProcessBroker();
  const store = createMemoryEventStore();
  const metrics = createMetrics();
  const ingest = createIngest({
    store,
    source: broker.ingestSource(),
    logger,
    metrics,
    flushMs: 1,
    nodeBudget: { ratePerSecond: 1, burst: 10 },
    now: () => new Date('2026-11-30T10:00:00Z'), // time stands still: no refill
  });
  await ingest.start();
  for (let i = 0; i < 50; i++) {
    broker.inject('report', reportOf('flood', { applied: [`r${i}`] }), { messageId: `flood/${i}`, userId: 'flood' });
    if (i % 10 === 0) broker.inject('report', reportOf('quiet'), { messageId: `quiet/${i}`, userId: 'quiet' });
  }
  await settle(ingest, () => ingest.stats().acked + ingest.stats().rateLimited === 55);
  const ids = async (node: string) =>
    (await store.readStream(streamOf(node))).map((e) => (e.type === 'ReportReceived' ? e.data.transport.messageId : e.type));
  assert.deepEqual(await ids('quiet'), ['quiet/0', 'quiet/10', 'quiet/20', 'quiet/30', 'quiet/40']);
  assert.deepEqual(
    await ids('flood'),
    Array.from({ length: 10 }, (_, i) => `flood/${i}`),
    'the burst, in order',
  );
  const dead = broker.deadLetters();
  assert.equal(dead.length, 40);
  assert.ok(dead.every((d) => d.code === 'CONVERGE_ERR_RATE_LIMITED' && d.userId === 'flood'));
  assert.deepEqual(broker.depth(), { 'mesh.reports': 0, 'mesh.alive': 0 }, 'nothing left unacked or unrefused');
  const rejected = await metrics.registry.getSingleMetric('converge_ingest_rejected_total')?.get();
  assert.equal(rejected?.values.find((v) => v.labels['reason'] === 'CONVERGE_ERR_RATE_LIMITED')?.value, 40);
  await ingest.stop();
});

test('a store append carries at most batchBytes of report bodies, and at least one report', async () => {
  const broker = createInProcessBroker();
  const inner = createMemoryEventStore();
  const appended: number[] = [];
  const store: EventStore = {
    ...inner,
    append: async (writes) => {
      appended.push(writes.reduce((n, w) => n + w.events.length, 0));
      return inner.append(writes);
    },
  };
  // Every body parsed in the turn it arrives (parseBytesPerTurn past them all): spread over turns,
  // a partial batch may be flushed after flushMs before the next body is parsed.
  const ingest = createIngest({
    store,
    source: broker.ingestSource(),
    logger,
    flushMs: 1,
    batchBytes: 150_000,
    parseBytesPerTurn: 1_000_000,
  });
  await ingest.start();
  // ~100 KB each: 5,000 failed resources.
  const failed = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`resource-${i}`, 'pull denied']));
  const body = reportOf('wide', { failed });
  assert.ok(body.length > 100_000 && body.length < 150_000);
  for (let i = 0; i < 7; i++) broker.inject('report', body, { messageId: `wide/${i}`, userId: 'wide' });
  await settle(ingest, () => ingest.stats().acked === 7);
  assert.deepEqual(appended, [2, 2, 2, 1]);
  await ingest.stop();
});

test('a batch the store refuses whole is written one by one and every delivery in it is counted once: acked, and appended only if written', async () => {
  // A node that re-publishes a report whose confirm it lost (same message id) puts one event id in
  // a batch twice, and the store refuses the whole call; each delivery is then written alone. An
  // alive inside the resolution window has no event: it is acked there, and must be counted so, or
  // `acked` never reaches `received` (the model-based fault test waited on it and timed out).
  const broker = createInProcessBroker();
  const store = createMemoryEventStore();
  const ingest = createIngest({ store, source: broker.ingestSource(), logger, flushMs: 1, now: () => new Date('2026-11-30T10:00:00Z') });
  await ingest.start();
  broker.inject('report', reportOf('n1'), { messageId: 'n1/1', userId: 'n1' });
  broker.inject('report', reportOf('n1'), { messageId: 'n1/1', userId: 'n1' });
  broker.inject('alive', encodeAlive({ node: 'n1' }), { messageId: 'n1/a1', userId: 'n1' });
  broker.inject('alive', encodeAlive({ node: 'n1' }), { messageId: 'n1/a2', userId: 'n1' });
  await settle(ingest, () => broker.depth()['mesh.reports'] === 0 && broker.depth()['mesh.alive'] === 0 && ingest.stats().pending === 0);
  assert.deepEqual(
    (await store.readStream(streamOf('n1'))).map((e) => e.type),
    ['ReportReceived', 'AliveSeen'],
  );
  const { received, acked, appended, coalesced } = ingest.stats();
  assert.deepEqual({ received, acked, appended, coalesced }, { received: 4, acked: 4, appended: 2, coalesced: 1 });
  await ingest.stop();
});

/** A source that acks into `acked` and delivers a report from `node` (message ids `<node>/<n>`, n counting every delivery). */
function handSource(): { source: IngestSource; deliver: (node: string, body: Buffer) => void; acked: Delivery[] } {
  let onDelivery: ((d: Delivery) => void) | null = null;
  const acked: Delivery[] = [];
  const source: IngestSource = {
    start: async (f) => {
      onDelivery = f;
    },
    ack: (ds) => acked.push(...ds),
    isLive: () => true,
    deadLetter: async () => {},
    reject: () => {},
    pause: async () => {},
    stop: async () => {},
  };
  let seq = 0;
  const deliver = (node: string, body: Buffer): void =>
    onDelivery!({
      kind: 'report',
      body,
      messageId: `${node}/${seq}`,
      userId: node,
      redelivered: false,
      routingKey: 'report',
      handle: seq++,
    });
  return { source, deliver, acked };
}

test('wide reports delivered in one burst are parsed at most parseBytesPerTurn of body a turn, in the order they came, a turn between', async () => {
  // amqplib hands every frame it has buffered to onDelivery in one go: five accepted 130 KB
  // reports parsed there held the event loop 35–87 ms (bench/fairness). Past the
  // per-turn bytes, deliveries wait their turn, and nothing later overtakes one that waits.
  const { source, deliver } = handSource();
  const store = createMemoryEventStore();
  const ingest = createIngest({ store, source, logger, flushMs: 1, parseBytesPerTurn: 100_000 });
  await ingest.start();
  const failed = Object.fromEntries(Array.from({ length: 6_000 }, (_, i) => [`resource-${i}`, 'pull denied']));
  const wide = (node: string): Buffer => reportOf(node, { failed });
  assert.ok(wide('a').length > 100_000);

  deliver('a', wide('a'));
  deliver('b', wide('b'));
  deliver('c', wide('c'));
  deliver('c', reportOf('c', { applied: ['after'] })); // small, but behind c's wide one
  deliver('v', reportOf('v')); // small, and v has nothing waiting: not held back
  const seen = (): string[] => ['a', 'b', 'c', 'v'].filter((n) => ingest.lastSeenAt(n) !== null);
  assert.deepEqual(seen(), ['a', 'v'], 'the first is parsed at once, the wide rest wait for a later turn');
  assert.equal(ingest.stats().pending, 5, 'waiting deliveries count as pending');
  await nextTurn();
  assert.deepEqual(seen(), ['a', 'b', 'v']);
  await nextTurn();
  assert.deepEqual(seen(), ['a', 'b', 'c', 'v']);
  await settle(ingest, () => ingest.stats().acked === 5);
  const stored: string[] = [];
  for await (const batch of store.readAll())
    for (const e of batch) stored.push(e.type === 'ReportReceived' ? (e.data.transport.messageId ?? '') : e.type);
  assert.deepEqual(stored, ['a/0', 'v/4', 'b/1', 'c/2', 'c/3']);

  // Small reports are not held back: 1,000 of them fit one turn's bytes.
  for (let i = 0; i < 1_000; i++) deliver(`s${i}`, reportOf(`s${i}`));
  assert.equal(ingest.lastSeenAt('s999') === null, false);
  await ingest.stop();
});

test('stop parses and writes the deliveries still waiting for their turn', async () => {
  const { source, deliver, acked } = handSource();
  const store = createMemoryEventStore();
  const ingest = createIngest({ store, source, logger, flushMs: 1_000, parseBytesPerTurn: 1 });
  await ingest.start();
  for (let i = 0; i < 3; i++) deliver('n', reportOf('n'));
  await ingest.stop();
  assert.equal(acked.length, 3);
  assert.deepEqual(
    (await store.readStream(streamOf('n'))).map((e) => (e.type === 'ReportReceived' ? e.data.transport.messageId : e.type)),
    ['n/0', 'n/1', 'n/2'],
  );
});

test('on a group-commit SQLite store nothing is acked before the WAL sync covering it succeeds, and nothing at all after one fails', async (t) => {
  t.diagnostic('power loss cannot be tested here: the WAL sync is held and failed by hand, the power stays on');
  const dir = mkdtempSync(join(tmpdir(), 'converge-ingest-sync-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const held: { resolve: () => void; reject: (e: Error) => void }[] = [];
  const walSync = (): Promise<void> => new Promise<void>((resolve, reject) => void held.push({ resolve, reject }));
  const store = createSqliteEventStore(join(dir, 'events.db'), { sync: 'group', walSync });
  const { source, deliver, acked } = handSource();
  const ingest = createIngest({ store, source, logger, flushMs: 1, retry: { minMs: 1, maxMs: 5 } });
  await ingest.start();
  for (let i = 0; i < 3; i++) deliver('n', reportOf('n'));
  await until('the batch committed and its sync started', () => held.length === 1);
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(acked, [], 'acked before the commit was on disk');
  held.shift()!.resolve();
  await until('the batch acked', () => acked.length === 3);

  deliver('n', reportOf('n'));
  await until('the next sync', () => held.length === 1);
  held.shift()!.reject(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
  await until('ingest unhealthy', () => !ingest.isHealthy());
  // Retried, and refused every time: the store acks nothing after a failed sync.
  await until('a few retries', () => (ingest.health().error ?? '').includes('EIO'));
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(acked.length, 3);
  assert.equal(held.length, 0, 'no sync after the failed one');
  await ingest.stop();
  await store.close();
});

test('on a group-commit store the next batch commits while the one before is synced, and acks keep commit order', async (t) => {
  t.diagnostic('power loss cannot be tested here: the WAL sync is held by hand, the power stays on');
  const dir = mkdtempSync(join(tmpdir(), 'converge-ingest-pipeline-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const held: (() => void)[] = [];
  const walSync = (): Promise<void> => new Promise<void>((resolve) => void held.push(resolve));
  const inner = createSqliteEventStore(join(dir, 'events.db'), { sync: 'group', walSync });
  let commits = 0;
  const store: EventStore = {
    ...inner,
    pipeline: () => {
      const pipe = inner.pipeline!();
      return {
        append: (writes) => {
          commits++;
          return pipe.append(writes);
        },
      };
    },
  };
  const { source, deliver, acked } = handSource();
  const ingest = createIngest({ store, source, logger, batchSize: 2, flushMs: 1_000 });
  await ingest.start();
  deliver('a', reportOf('a'));
  deliver('b', reportOf('b'));
  await until('the first batch committed and its sync started', () => held.length === 1);
  deliver('a', reportOf('a'));
  deliver('b', reportOf('b'));
  await until('the second batch committed while the first is synced', () => commits === 2);
  assert.equal(acked.length, 0);
  held.shift()!();
  await until('the first batch acked', () => acked.length === 2);
  await until("the second batch's sync", () => held.length === 1);
  assert.equal(acked.length, 2, 'the second batch is not on disk yet');
  held.shift()!();
  await until('the second batch acked', () => acked.length === 4);
  assert.deepEqual(
    acked.map((d) => d.messageId),
    ['a/0', 'b/1', 'a/2', 'b/3'],
  );
  await ingest.stop();
  await inner.close();
});

test('an append of the pipeline that fails is retried in order, and no later batch overtakes it', async () => {
  // EventStore.pipeline: once a call fails, the pipeline refuses every later one untried. Ingest
  // has sent later batches meanwhile; each goes back through the retrying path in order, and a
  // new pipeline starts only once they have all settled, so a node's reports stay in the order
  // they came (a newer report stored before an older one would be taken for the latest).
  const inner = createMemoryEventStore();
  const held: (() => void)[] = [];
  let calls = 0;
  let pipelines = 0;
  let retried = false;
  const store: EventStore = {
    ...inner,
    // The first retry fails too, so the failed batch's retry is still backing off when the later
    // batches hear of their refusal.
    append: async (writes) => {
      if (!retried) {
        retried = true;
        throw new Error('still on fire');
      }
      return inner.append(writes);
    },
    pipeline: () => {
      pipelines++;
      let failed = false;
      let previous: Promise<unknown> = Promise.resolve();
      return {
        append: (writes) => {
          const call = ++calls;
          // Each call waits to be let through, so later batches are in flight when the first
          // fails; and, as the port says, runs only after the call before it has settled.
          const released = new Promise<void>((resolve) => void held.push(resolve));
          const run = Promise.all([released, previous.catch(() => undefined)]).then(() => {
            if (failed) throw new Error('not tried: an earlier append of its pipeline failed');
            if (call === 1) {
              failed = true;
              throw new Error('disk on fire');
            }
            return inner.append(writes);
          });
          previous = run;
          return run;
        },
      };
    },
  };
  const { source, deliver, acked } = handSource();
  const ingest = createIngest({ store, source, logger, batchSize: 2, flushMs: 1_000, retry: { minMs: 1, maxMs: 5 } });
  await ingest.start();
  for (let i = 0; i < 6; i++) deliver('n', reportOf('n'));
  await until('three batches in flight', () => held.length === 3);
  // The later batches hear of their refusal first: they must still wait for the first one's retry.
  while (held.length > 0) {
    held.pop()!();
    await new Promise((r) => setTimeout(r, 5));
  }
  await until('every report acked', () => acked.length === 6);
  assert.deepEqual(
    (await inner.readStream(streamOf('n'))).map((e) => (e.type === 'ReportReceived' ? e.data.transport.messageId : e.type)),
    ['n/0', 'n/1', 'n/2', 'n/3', 'n/4', 'n/5'],
  );
  // Later batches go through a new pipeline.
  for (let i = 0; i < 2; i++) deliver('n', reportOf('n'));
  await until('the next batch through a new pipeline', () => held.length === 1);
  assert.equal(pipelines, 2);
  held.shift()!();
  await until('acked', () => acked.length === 8);
  await ingest.stop();
});

test('on a writer-thread SQLite store a batch refused whole goes one by one through the pipeline path, and the rest is stored', async (t) => {
  // A duplicate event id in one batch makes the store refuse the whole append; through the
  // pipeline the refusal comes back asynchronously, and the batch must still be written one by one.
  const dir = mkdtempSync(join(tmpdir(), 'converge-ingest-thread-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = createSqliteEventStore(join(dir, 'events.db'), { sync: 'thread' });
  const broker = createInProcessBroker();
  const ingest = createIngest({ store, source: broker.ingestSource(), logger, flushMs: 1, retry: { minMs: 1, maxMs: 5 } });
  await ingest.start();
  broker.inject('report', reportOf('n1'), { messageId: 'n1/1', userId: 'n1' });
  broker.inject('report', reportOf('n1'), { messageId: 'n1/1', userId: 'n1' });
  broker.inject('report', reportOf('n2'), { messageId: 'n2/1', userId: 'n2' });
  await settle(ingest, () => broker.depth()['mesh.reports'] === 0 && ingest.stats().acked === 3);
  assert.deepEqual(
    (await store.readStream(streamOf('n1'))).map((e) => (e.type === 'ReportReceived' ? e.data.transport.messageId : e.type)),
    ['n1/1'],
  );
  assert.equal((await store.readStream(streamOf('n2'))).length, 1);
  const { received, acked, appended } = ingest.stats();
  assert.deepEqual({ received, acked, appended }, { received: 3, acked: 3, appended: 2 });
  await ingest.stop();
  await store.close();
});
