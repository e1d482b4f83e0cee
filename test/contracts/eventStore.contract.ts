import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { isConvergeError } from '../../src/core/errors.ts';
import type { ErrorCode } from '../../src/core/errors.ts';
import { makeRolloutEvent, rolloutSendId } from '../../src/core/events/index.ts';
import type { ConvergeEvent, Recorded } from '../../src/core/events/index.ts';
import { readNodeColumns } from '../../src/store/index.ts';
import type { EventStore, NewEvent } from '../../src/store/index.ts';
import { eventTime } from '../../projections/index.ts';
import { until } from '../support/until.ts';
import { storeStatsContract } from './storeStats.contract.ts';

// The one conformance suite every EventStore adapter passes (docs/design.md §5). Every
// test names its own streams and checkpoints with a random suffix, so the suite also runs
// against a shared EventStoreDB server that other runs have already written to.

export type StoreHarness = Readonly<{
  /** A store ready to use (it may hold other tests' events; tests only look at their own). */
  create: () => Promise<EventStore>;
  /** Reopen the storage behind a closed store; omitted with `reopenSkip` when that means nothing. */
  reopen?: (closed: EventStore) => Promise<EventStore>;
  reopenSkip?: string;
  /** The max event size `create` configured. */
  maxEventBytes: number;
  /** Set when the adapter cannot run here at all (the whole suite shows as skipped). */
  skip?: string;
  /** Differences the adapter documents; each skips the tests that would assert otherwise. */
  crossStreamAtomicitySkip?: string;
  crossStreamDuplicateIdSkip?: string;
}>;

const nodeName = (): string => `t${randomUUID().slice(0, 8)}`;
const at = (i: number): string => new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString();

export const aliveSeen = (node: string, i = 0): NewEvent => ({ id: randomUUID(), type: 'AliveSeen', data: { node, seenAt: at(i) } });
export const declarationSent = (node: string, serial: number, extra = ''): NewEvent => ({
  id: randomUUID(),
  type: 'DeclarationSent',
  data: {
    node,
    serial,
    digest: 'a'.repeat(64),
    specDigest: 'b'.repeat(64),
    declaration: Buffer.from(`{"node":"${node}"}${extra}`).toString('base64'),
    signature: 'c2ln',
    keyId: 'k1',
    resourceIds: ['r1'],
    sentAt: at(serial),
  },
});
export const reportReceived = (node: string, i = 0): NewEvent => ({
  id: randomUUID(),
  type: 'ReportReceived',
  data: {
    node,
    declared: 'a'.repeat(64),
    applied: ['r1'],
    failed: {},
    refused: '',
    carried: [],
    receivedAt: at(i),
    transport: { messageId: null, redelivered: false, userId: node },
  },
});

export const rolloutStarted = (rollout: string, nodes: readonly string[]): NewEvent =>
  makeRolloutEvent('RolloutStarted', {
    rollout,
    resources: [{ id: 'r1' }],
    specDigest: 'b'.repeat(64),
    selection: { kind: 'nodes' },
    targets: nodes.length,
    waves: [nodes.length],
    asGiven: { waves: '100%', maxFailures: '0' },
    maxFailures: 0,
    waveTimeoutMs: 60_000,
    pauseMs: 0,
    startedBy: 'test',
    startedAt: at(0),
  });

async function rejectsWith(p: Promise<unknown>, code: ErrorCode): Promise<Error> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught !== undefined, `expected ${code}, but the call succeeded`);
  assert.ok(isConvergeError(caught, code), `expected ${code}, got ${String((caught as { code?: unknown }).code)}: ${String(caught)}`);
  return caught as Error;
}

const ids = (events: readonly Recorded[]): string[] => events.map((e) => e.id);
const stripe = (e: NewEvent): ConvergeEvent => ({ type: e.type, data: e.data }) as ConvergeEvent;

async function collectAll(store: EventStore, options: Parameters<EventStore['readAll']>[0]): Promise<Recorded[]> {
  const out: Recorded[] = [];
  for await (const batch of store.readAll(options)) out.push(...batch);
  return out;
}

export function eventStoreContract(name: string, harness: StoreHarness): void {
  const opts = harness.skip === undefined ? {} : { skip: harness.skip };
  void describe(`EventStore contract: ${name}`, opts, () => {
    const withStore = (fn: (store: EventStore) => Promise<void>) => async () => {
      const store = await harness.create();
      try {
        await fn(store);
      } finally {
        await store.close();
      }
    };

    void test(
      'reading a stream that was never written returns no events, forwards and backwards',
      withStore(async (store) => {
        const s = `node-${nodeName()}`;
        assert.deepEqual(await store.readStream(s), []);
        assert.deepEqual(await store.readStream(s, { direction: 'backwards' }), []);
        assert.deepEqual(await store.readStream(s, { fromRevision: 5n, limit: 3 }), []);
      }),
    );

    void test(
      'appended events read back in order with revisions from 0, increasing positions, and their data intact',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const events = [declarationSent(n, 1), reportReceived(n, 2), aliveSeen(n, 3)];
        const r = await store.append([{ stream: s, expected: 'no_stream', events }]);
        assert.deepEqual(r.streams, [{ stream: s, nextExpected: 2n, written: 3 }]);
        const read = await store.readStream(s);
        assert.deepEqual(ids(read), ids(events as Recorded[]));
        assert.deepEqual(
          read.map((e) => e.revision),
          [0n, 1n, 2n],
        );
        assert.deepEqual(
          read.map((e) => ({ type: e.type, data: e.data })),
          events.map(stripe),
        );
        assert.ok(read.every((e) => e.stream === s));
        assert.ok(read[0]!.position < read[1]!.position && read[1]!.position < read[2]!.position);
        assert.equal(r.position, read[2]!.position);
      }),
    );

    void test(
      'a stream reads backwards from the end or from a revision, and forwards from a revision, within a limit',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const events = Array.from({ length: 6 }, (_, i) => aliveSeen(n, i));
        await store.append([{ stream: s, expected: 'no_stream', events }]);
        const back = await store.readStream(s, { direction: 'backwards', limit: 2 });
        assert.deepEqual(
          back.map((e) => e.revision),
          [5n, 4n],
        );
        const backFrom = await store.readStream(s, { direction: 'backwards', fromRevision: 3n });
        assert.deepEqual(
          backFrom.map((e) => e.revision),
          [3n, 2n, 1n, 0n],
        );
        const fwd = await store.readStream(s, { fromRevision: 2n, limit: 3 });
        assert.deepEqual(
          fwd.map((e) => e.revision),
          [2n, 3n, 4n],
        );
      }),
    );

    void test(
      'no_stream is refused once the stream exists, and nothing is written',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 1)] }]);
        await rejectsWith(
          store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 2)] }]),
          'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
        );
        assert.equal((await store.readStream(s)).length, 1);
      }),
    );

    void test(
      'stream_exists is refused for a stream that has no events, and nothing is written',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        await rejectsWith(
          store.append([{ stream: s, expected: 'stream_exists', events: [aliveSeen(n, 1)] }]),
          'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
        );
        assert.deepEqual(await store.readStream(s), []);
        await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 2)] }]);
        const r = await store.append([{ stream: s, expected: 'stream_exists', events: [aliveSeen(n, 3)] }]);
        assert.equal(r.streams[0]!.nextExpected, 1n);
      }),
    );

    void test(
      'an exact revision is refused when the stream is behind or ahead of it, and accepted when it matches',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        await rejectsWith(store.append([{ stream: s, expected: 0n, events: [aliveSeen(n, 0)] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
        await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 1), aliveSeen(n, 2)] }]);
        await rejectsWith(store.append([{ stream: s, expected: 0n, events: [aliveSeen(n, 3)] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
        await rejectsWith(store.append([{ stream: s, expected: 2n, events: [aliveSeen(n, 3)] }]), 'CONVERGE_ERR_WRONG_EXPECTED_REVISION');
        const r = await store.append([{ stream: s, expected: 1n, events: [aliveSeen(n, 3)] }]);
        assert.deepEqual(r.streams, [{ stream: s, nextExpected: 2n, written: 1 }]);
        assert.equal((await store.readStream(s)).length, 3);
      }),
    );

    void test(
      'any appends whatever the stream holds',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        await store.append([{ stream: s, expected: 'any', events: [aliveSeen(n, 1)] }]);
        await store.append([{ stream: s, expected: 'any', events: [aliveSeen(n, 2)] }]);
        assert.deepEqual(
          (await store.readStream(s)).map((e) => e.revision),
          [0n, 1n],
        );
      }),
    );

    void test(
      'concurrent appends to one stream with the same expected revision: exactly one wins',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        await store.append([{ stream: s, expected: 'no_stream', events: [aliveSeen(n, 0)] }]);
        const racers = Array.from({ length: 8 }, (_, i) => [aliveSeen(n, 10 + i), aliveSeen(n, 20 + i)]);
        const results = await Promise.allSettled(racers.map((events) => store.append([{ stream: s, expected: 0n, events }])));
        const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
        assert.equal(won.length, 1, 'exactly one racer wins');
        for (const r of results)
          if (r.status === 'rejected') assert.ok(isConvergeError(r.reason, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION'), String(r.reason));
        const read = await store.readStream(s);
        assert.deepEqual(
          ids(read).slice(1),
          racers[won[0]!]!.map((e) => e.id),
        );
      }),
    );

    void test(
      'retrying an append with the same event ids is a no-op, even after the stream moved on',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const first = [aliveSeen(n, 1), aliveSeen(n, 2)];
        const a = await store.append([{ stream: s, expected: 'no_stream', events: first }]);
        const retry = await store.append([{ stream: s, expected: 'no_stream', events: first }]);
        assert.deepEqual(retry.streams, [{ stream: s, nextExpected: 1n, written: 0 }]);
        assert.equal(retry.position, null);
        await store.append([{ stream: s, expected: 1n, events: [aliveSeen(n, 3)] }]);
        const late = await store.append([{ stream: s, expected: 'no_stream', events: first }]);
        assert.equal(late.streams[0]!.written, 0);
        const read = await store.readStream(s);
        assert.equal(read.length, 3);
        assert.equal(new Set(ids(read)).size, 3);
        assert.equal(read[1]!.position, a.position);
      }),
    );

    void test(
      'an event id stored in another stream is refused as a duplicate, and nothing is written',
      { skip: harness.crossStreamDuplicateIdSkip ?? false },
      withStore(async (store) => {
        const n = nodeName();
        const e = aliveSeen(n, 1);
        await store.append([{ stream: `node-${n}`, expected: 'any', events: [e] }]);
        const other = `node-${n}-other`;
        await rejectsWith(
          store.append([{ stream: other, expected: 'any', events: [aliveSeen(n, 2), e] }]),
          'CONVERGE_ERR_DUPLICATE_EVENT_ID',
        );
        assert.deepEqual(await store.readStream(other), []);
      }),
    );

    void test(
      'one event id twice in the same call is refused before anything is written',
      withStore(async (store) => {
        const n = nodeName();
        const e = aliveSeen(n, 1);
        await rejectsWith(store.append([{ stream: `node-${n}`, expected: 'any', events: [e, e] }]), 'CONVERGE_ERR_DUPLICATE_EVENT_ID');
        assert.deepEqual(await store.readStream(`node-${n}`), []);
      }),
    );

    void test(
      'one call appends to many streams and reports each stream in order',
      withStore(async (store) => {
        const [a, b, c] = [nodeName(), nodeName(), nodeName()];
        await store.append([{ stream: `node-${b}`, expected: 'no_stream', events: [aliveSeen(b, 0)] }]);
        const r = await store.append([
          { stream: `node-${a}`, expected: 'no_stream', events: [aliveSeen(a, 1), aliveSeen(a, 2)] },
          { stream: `node-${b}`, expected: 0n, events: [aliveSeen(b, 1)] },
          { stream: `node-${c}`, expected: 'any', events: [] },
        ]);
        assert.deepEqual(r.streams, [
          { stream: `node-${a}`, nextExpected: 1n, written: 2 },
          { stream: `node-${b}`, nextExpected: 1n, written: 1 },
          { stream: `node-${c}`, nextExpected: -1n, written: 0 },
        ]);
        const last = [...(await store.readStream(`node-${a}`)), ...(await store.readStream(`node-${b}`))].reduce(
          (m, e) => (e.position > m ? e.position : m),
          0n,
        );
        assert.equal(r.position, last);
      }),
    );

    void test(
      'two writes to the same stream in one call apply in order',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const [e1, e2] = [aliveSeen(n, 1), aliveSeen(n, 2)];
        const r = await store.append([
          { stream: s, expected: 'no_stream', events: [e1] },
          { stream: s, expected: 0n, events: [e2] },
        ]);
        assert.deepEqual(
          r.streams.map((x) => x.nextExpected),
          [0n, 1n],
        );
        assert.deepEqual(ids(await store.readStream(s)), [e1.id, e2.id]);
      }),
    );

    void test(
      'a many-stream append where one stream conflicts writes nothing of the batch',
      { skip: harness.crossStreamAtomicitySkip ?? false },
      withStore(async (store) => {
        const [a, b, c] = [nodeName(), nodeName(), nodeName()];
        await store.append([{ stream: `node-${b}`, expected: 'no_stream', events: [aliveSeen(b, 0)] }]);
        const head = await store.headPosition();
        await rejectsWith(
          store.append([
            { stream: `node-${a}`, expected: 'no_stream', events: [aliveSeen(a, 1)] },
            { stream: `node-${b}`, expected: 'no_stream', events: [aliveSeen(b, 1)] },
            { stream: `node-${c}`, expected: 'any', events: [aliveSeen(c, 1)] },
          ]),
          'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
        );
        assert.deepEqual(await store.readStream(`node-${a}`), []);
        assert.equal((await store.readStream(`node-${b}`)).length, 1);
        assert.deepEqual(await store.readStream(`node-${c}`), []);
        const after = await collectAll(store, { after: head });
        assert.deepEqual(
          after.filter((e) => [a, b, c].some((x) => e.stream === `node-${x}`)),
          [],
        );
      }),
    );

    void test(
      'an event over the size limit is refused with EVENT_TOO_LARGE and nothing of the call is written',
      withStore(async (store) => {
        const [a, b] = [nodeName(), nodeName()];
        const huge = declarationSent(b, 1, ' '.repeat(harness.maxEventBytes + 1));
        const err = await rejectsWith(
          store.append([
            { stream: `node-${a}`, expected: 'any', events: [aliveSeen(a, 1)] },
            { stream: `node-${b}`, expected: 'any', events: [huge] },
          ]),
          'CONVERGE_ERR_EVENT_TOO_LARGE',
        );
        assert.match(err.message, /limit/);
        assert.deepEqual(await store.readStream(`node-${a}`), []);
        assert.deepEqual(await store.readStream(`node-${b}`), []);
      }),
    );

    void test(
      'readAll returns events in global position order, in the order they were appended across streams',
      withStore(async (store) => {
        const [a, b] = [nodeName(), nodeName()];
        const head = await store.headPosition();
        const order: NewEvent[] = [];
        for (let i = 0; i < 6; i++) {
          const n = i % 2 === 0 ? a : b;
          const e = aliveSeen(n, i);
          order.push(e);
          await store.append([{ stream: `node-${n}`, expected: 'any', events: [e] }]);
        }
        const all = await collectAll(store, { after: head });
        const mine = all.filter((e) => e.stream === `node-${a}` || e.stream === `node-${b}`);
        assert.deepEqual(
          ids(mine),
          order.map((e) => e.id),
        );
        for (let i = 1; i < all.length; i++) assert.ok(all[i - 1]!.position < all[i]!.position, 'positions strictly increase');
        assert.ok(head === null || all.every((e) => e.position > head), 'after is exclusive');
      }),
    );

    void test(
      'readAll honours after, limit, and a stream-prefix filter',
      withStore(async (store) => {
        const n = nodeName();
        const head = await store.headPosition();
        const node = [aliveSeen(n, 1), aliveSeen(n, 2), aliveSeen(n, 3)];
        await store.append([
          { stream: `other-${n}`, expected: 'any', events: [aliveSeen(n, 0)] },
          { stream: `node-${n}`, expected: 'any', events: node },
        ]);
        const prefixed = await collectAll(store, { after: head, streamPrefix: 'node-' });
        assert.ok(
          prefixed.every((e) => e.stream.startsWith('node-')),
          'only node- streams',
        );
        assert.deepEqual(
          ids(prefixed.filter((e) => e.stream === `node-${n}`)),
          node.map((e) => e.id),
        );
        const limited = await collectAll(store, { after: head, limit: 2 });
        assert.equal(limited.length, 2);
        const rest = await collectAll(store, { after: limited[1]!.position });
        assert.ok(rest.every((e) => e.position > limited[1]!.position));
        assert.ok(ids(rest).includes(node[2]!.id));
      }),
    );

    void test(
      "the bulk folds' columnar read (readNodeColumns: the store's own, or its readAll in columns) holds readAll's events",
      withStore(async (store) => {
        const n = nodeName();
        const head = await store.headPosition();
        await store.append([
          { stream: `other-${n}`, expected: 'any', events: [aliveSeen(n, 0)] },
          { stream: `node-${n}`, expected: 'any', events: [declarationSent(n, 1), reportReceived(n, 2), aliveSeen(n, 3)] },
        ]);
        for (const prefix of [undefined, 'node-']) {
          const events = (await collectAll(store, { after: head, ...(prefix === undefined ? {} : { streamPrefix: prefix }) })).filter((e) =>
            e.stream.endsWith(n),
          );
          const entries: { position: bigint; kind: number; node: string; streamNode: string | null; time: number }[] = [];
          for await (const page of readNodeColumns(store, { after: head, ...(prefix === undefined ? {} : { streamPrefix: prefix }) }))
            for (let i = 0; i < page.length; i++)
              if (page.node[i] === n)
                entries.push({
                  position: BigInt(page.position[i]!),
                  kind: page.kind[i]!,
                  node: page.node[i]!,
                  streamNode: page.streamNode[i]!,
                  time: page.time[i]!,
                });
          assert.deepEqual(
            entries,
            events.map((e) => ({
              position: e.position,
              kind: { DeclarationSent: 1, ReportReceived: 2, AliveSeen: 3 }[e.type as string],
              node: n,
              streamNode: e.stream === `node-${n}` ? n : null,
              time: Date.parse(eventTime(e)),
            })),
          );
        }
      }),
    );

    void test(
      "a rollout's stream and its tagged declarations are stored, read back whole, listed by prefix and followed live",
      withStore(async (store) => {
        const n = nodeName();
        const rollout = `r${n}`;
        const head = await store.headPosition();
        const started = rolloutStarted(rollout, [n]);
        const listed = makeRolloutEvent('RolloutNodesListed', { rollout, from: 0, nodes: [n], listedAt: at(1) });
        const send = { ...declarationSent(n, 1), id: rolloutSendId(n, rollout) } as NewEvent;
        const tagged = { ...send, data: { ...send.data, rollout: { id: rollout, wave: 1 } } } as NewEvent;
        const sent = makeRolloutEvent(
          'RolloutSent',
          { rollout, wave: 1, sends: [{ node: n, serial: 1, digest: 'a'.repeat(64) }], skipped: [], sentAt: at(2) },
          { revision: 1n },
        );
        const seen: Recorded[] = [];
        const sub = store.subscribe({ after: head, handler: (events) => void seen.push(...events.filter((e) => e.id === sent.id)) });
        try {
          await store.append([{ stream: `rollout-${rollout}`, expected: 'no_stream', events: [started, listed] }]);
          await store.append([
            { stream: `node-${n}`, expected: 'no_stream', events: [tagged] },
            { stream: `rollout-${rollout}`, expected: 1n, events: [sent] },
          ]);
          const read = await store.readStream(`rollout-${rollout}`);
          assert.deepEqual(
            read.map((e) => ({ type: e.type, data: e.data })),
            [started, listed, sent].map(stripe),
          );
          assert.deepEqual((await store.readStream(`node-${n}`))[0]?.data, tagged.data, 'the rollout tag is kept');
          const listedByPrefix = (await collectAll(store, { after: head, streamPrefix: 'rollout-' })).filter(
            (e) => e.stream === `rollout-${rollout}`,
          );
          assert.deepEqual(ids(listedByPrefix), [started.id, listed.id, sent.id]);
          await until('the subscription delivers the rollout event', () => seen.length === 1);
        } finally {
          await sub.stop();
        }
      }),
    );

    void test(
      'headPosition is the position of the newest event',
      withStore(async (store) => {
        const n = nodeName();
        const r = await store.append([{ stream: `node-${n}`, expected: 'any', events: [aliveSeen(n, 1)] }]);
        assert.equal(await store.headPosition(), r.position);
      }),
    );

    void test(
      'a subscription catches up, then follows live, with no gap and no duplicate when appends land during catch-up',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const head = await store.headPosition();
        const expected: string[] = [];
        for (let i = 0; i < 30; i++) {
          const e = aliveSeen(n, i);
          expected.push(e.id);
          await store.append([{ stream: s, expected: 'any', events: [e] }]);
        }
        const seen: Recorded[] = [];
        let caughtUpAt = -1;
        let injected = false;
        const sub = store.subscribe({
          after: head,
          batchSize: 4,
          handler: async (events) => {
            seen.push(...events.filter((e) => e.stream === s));
            if (!injected) {
              // append while the subscription is still catching up
              injected = true;
              for (let i = 0; i < 5; i++) {
                const e = aliveSeen(n, 100 + i);
                expected.push(e.id);
                await store.append([{ stream: s, expected: 'any', events: [e] }]);
              }
            }
          },
          onCaughtUp: () => {
            caughtUpAt = seen.length;
          },
        });
        try {
          await until('catch-up', () => sub.isCaughtUp());
          assert.ok(caughtUpAt >= 30, 'caught up only after everything stored at start');
          for (let i = 0; i < 10; i++) {
            const e = aliveSeen(n, 200 + i);
            expected.push(e.id);
            await store.append([{ stream: s, expected: 'any', events: [e] }]);
          }
          await until('live events', () => seen.length >= expected.length);
          await new Promise((r) => setTimeout(r, 50));
          assert.deepEqual(ids(seen), expected);
          assert.equal(sub.position(), seen[seen.length - 1]!.position);
        } finally {
          await sub.stop();
        }
      }),
    );

    void test(
      'a subscription with a named checkpoint resumes after the last handled batch',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const cp = `contract-${n}`;
        assert.equal(await store.getCheckpoint(cp), null);
        const head = await store.headPosition();
        const first = [aliveSeen(n, 1), aliveSeen(n, 2), aliveSeen(n, 3)];
        await store.append([{ stream: s, expected: 'any', events: first }]);
        const seen1: Recorded[] = [];
        const sub1 = store.subscribe({
          after: head,
          checkpoint: cp,
          handler: (ev) => void seen1.push(...ev.filter((e) => e.stream === s)),
        });
        await until('first events', () => seen1.length === 3);
        await until('catch-up', () => sub1.isCaughtUp());
        await sub1.stop();
        const saved = await store.getCheckpoint(cp);
        assert.ok(saved !== null && saved >= seen1[2]!.position, 'checkpoint saved at or after the last handled event');

        const second = [aliveSeen(n, 4), aliveSeen(n, 5)];
        await store.append([{ stream: s, expected: 'any', events: second }]);
        const seen2: Recorded[] = [];
        // `after: head` is ignored because the checkpoint has a saved value
        const sub2 = store.subscribe({
          after: head,
          checkpoint: cp,
          handler: (ev) => void seen2.push(...ev.filter((e) => e.stream === s)),
        });
        try {
          await until('events after the checkpoint', () => seen2.length >= 2);
          await until('catch-up', () => sub2.isCaughtUp());
          assert.deepEqual(
            ids(seen2),
            second.map((e) => e.id),
          );
        } finally {
          await sub2.stop();
        }
      }),
    );

    void test(
      'setCheckpoint and getCheckpoint keep the latest position per name',
      withStore(async (store) => {
        const cp = `contract-${nodeName()}`;
        await store.setCheckpoint(cp, 5n);
        await store.setCheckpoint(cp, 9n);
        assert.equal(await store.getCheckpoint(cp), 9n);
        assert.equal(await store.getCheckpoint(`${cp}-other`), null);
      }),
    );

    void test(
      'a subscription with a type filter hands over only those types',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const head = await store.headPosition();
        const report = reportReceived(n, 2);
        await store.append([{ stream: s, expected: 'any', events: [declarationSent(n, 1), report, aliveSeen(n, 3)] }]);
        const seen: Recorded[] = [];
        const sub = store.subscribe({
          after: head,
          types: ['ReportReceived'],
          handler: (ev) => void seen.push(...ev.filter((e) => e.stream === s)),
        });
        try {
          await until('catch-up', () => sub.isCaughtUp() && seen.length >= 1);
          const last = aliveSeen(n, 9);
          const report2 = reportReceived(n, 10);
          await store.append([{ stream: s, expected: 'any', events: [last, report2] }]);
          await until('live report', () => seen.length >= 2);
          await new Promise((r) => setTimeout(r, 50));
          assert.deepEqual(ids(seen), [report.id, report2.id]);
          assert.ok(seen.every((e) => e.type === 'ReportReceived'));
        } finally {
          await sub.stop();
        }
      }),
    );

    void test(
      'a type-filtered subscription with a checkpoint resumes after the last event of those types it handled, through many others',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const cp = `contract-types-${n}`;
        const head = await store.headPosition();
        const first = declarationSent(n, 1);
        // Declarations are rare among reports and alives: the filter is what the relay relies on.
        const noise = (from: number): NewEvent[] =>
          Array.from({ length: 40 }, (_, i) => (i % 2 ? aliveSeen(n, from + i) : reportReceived(n, from + i)));
        await store.append([{ stream: s, expected: 'any', events: [...noise(0), first, ...noise(100)] }]);
        const seen1: Recorded[] = [];
        const sub1 = store.subscribe({
          after: head,
          checkpoint: cp,
          types: ['DeclarationSent'],
          batchSize: 7,
          handler: (ev) => void seen1.push(...ev),
        });
        await until('the first declaration', () => sub1.isCaughtUp() && seen1.some((e) => e.id === first.id));
        await sub1.stop();
        assert.ok(seen1.every((e) => e.type === 'DeclarationSent'));
        const saved = await store.getCheckpoint(cp);
        const firstAt = seen1.find((e) => e.id === first.id)!.position;
        assert.ok(saved !== null && saved >= firstAt, 'checkpoint at or after the declaration handled');

        const second = declarationSent(n, 2, ' second');
        await store.append([{ stream: s, expected: 'any', events: [...noise(200), second, ...noise(300)] }]);
        const seen2: Recorded[] = [];
        const sub2 = store.subscribe({
          after: head,
          checkpoint: cp,
          types: ['DeclarationSent'],
          handler: (ev) => void seen2.push(...ev.filter((e) => e.stream === s)),
        });
        try {
          await until('the second declaration', () => sub2.isCaughtUp() && seen2.length >= 1);
          await new Promise((r) => setTimeout(r, 50));
          assert.deepEqual(ids(seen2), [second.id], 'the declaration handled before the restart is not handed over again');
        } finally {
          await sub2.stop();
        }
      }),
    );

    void test(
      'a handler that throws gets the same batch again; nothing is skipped',
      withStore(async (store) => {
        const n = nodeName();
        const s = `node-${n}`;
        const head = await store.headPosition();
        const events = [aliveSeen(n, 1), aliveSeen(n, 2)];
        await store.append([{ stream: s, expected: 'any', events }]);
        const seen: Recorded[] = [];
        const errors: unknown[] = [];
        let failures = 2;
        const sub = store.subscribe({
          after: head,
          handler: (ev) => {
            const mine = ev.filter((e) => e.stream === s);
            if (mine.length > 0 && failures-- > 0) throw new Error('handler failed on purpose');
            seen.push(...mine);
          },
          onError: (err) => void errors.push(err),
        });
        try {
          await until('the batch after retries', () => seen.length >= 2);
          assert.deepEqual(
            ids(seen),
            events.map((e) => e.id),
          );
          assert.equal(errors.length, 2);
        } finally {
          await sub.stop();
        }
      }),
    );

    void test('after close, calls fail with STORE_CLOSED', async () => {
      const store = await harness.create();
      await store.close();
      const n = nodeName();
      await rejectsWith(store.append([{ stream: `node-${n}`, expected: 'any', events: [aliveSeen(n)] }]), 'CONVERGE_ERR_STORE_CLOSED');
      await rejectsWith(store.readStream(`node-${n}`), 'CONVERGE_ERR_STORE_CLOSED');
    });

    void test(
      'findSend answers the latest send of a digest to a node, and null for a digest never sent to it',
      withStore(async (store) => {
        const n = nodeName();
        const other = nodeName();
        const sentTo = (node: string, serial: number, digest: string): NewEvent => {
          const e = declarationSent(node, serial, `${serial}`);
          return { ...e, data: { ...e.data, digest } } as NewEvent;
        };
        const [d1, d2, d3, theirs] = ['1', '2', '3', '4'].map((c) => c.repeat(64)) as [string, string, string, string];
        const named = (digest: string): NewEvent => {
          const r = reportReceived(n, 9);
          return { ...r, data: { ...r.data, declared: digest } } as NewEvent;
        };
        await store.append([
          { stream: `node-${n}`, expected: 'any', events: [sentTo(n, 1, d1), named(d1), sentTo(n, 2, d2), sentTo(n, 3, d1)] },
          { stream: `node-${other}`, expected: 'any', events: [sentTo(other, 1, theirs)] },
        ]);
        await store.append([{ stream: `node-${n}`, expected: 'any', events: [named(d3), named(theirs)] }]);
        assert.deepEqual(await store.findSend(n, d1), { serial: 3, sentAt: at(3) }, 'sent twice: the latest');
        assert.deepEqual(await store.findSend(n, d2), { serial: 2, sentAt: at(2) });
        assert.equal(await store.findSend(n, d3), null, 'named by a report only: never sent');
        assert.equal(await store.findSend(n, theirs), null, "another node's digest");
        assert.deepEqual(await store.findSend(other, theirs), { serial: 1, sentAt: at(1) });
        assert.equal(await store.findSend(nodeName(), d1), null, 'a node with no stream');
      }),
    );

    void test(
      'the last-seen lease: each node keeps its latest time (never moved back), each engine its last flush',
      withStore(async (store) => {
        const [a, b] = [nodeName(), nodeName()];
        await store.saveLastSeen('e1', 1_000, [
          [a, 500],
          [b, 700],
        ]);
        await store.saveLastSeen('e2', 2_000, [
          [a, 400],
          [b, 900],
        ]);
        await store.saveLastSeen('e1', 3_000, []);
        const lease = await store.loadLastSeen();
        assert.equal(lease.nodes.get(a), 500, 'an older time does not move it back');
        assert.equal(lease.nodes.get(b), 900);
        assert.equal(lease.flushes.get('e1'), 3_000);
        assert.equal(lease.flushes.get('e2'), 2_000);
      }),
    );

    void test(
      "a report's sentEarlier reads back intact, in readStream and in readColumns' serial column",
      withStore(async (store) => {
        const n = nodeName();
        const base = reportReceived(n, 4);
        const found = { ...base, data: { ...base.data, sentEarlier: { serial: 7, sentAt: at(1) } } } as NewEvent;
        const none = { ...reportReceived(n, 5), data: { ...reportReceived(n, 5).data, sentEarlier: null } } as NewEvent;
        await store.append([{ stream: `node-${n}`, expected: 'any', events: [found, none, reportReceived(n, 6)] }]);
        const read = await store.readStream(`node-${n}`);
        assert.deepEqual(
          read.map((e) => (e.type === 'ReportReceived' ? e.data.sentEarlier : 'other')),
          [{ serial: 7, sentAt: at(1) }, null, undefined],
        );
        const serials: number[] = [];
        for await (const c of readNodeColumns(store, { streamPrefix: `node-${n}` }))
          for (let i = 0; i < c.length; i++) serials.push(c.serial[i]!);
        assert.deepEqual(serials, [7, 0, 0]);
      }),
    );

    const reopen = harness.reopen;
    void test(
      'reopening after close keeps every event and checkpoint, and never reuses a position',
      { skip: reopen === undefined ? (harness.reopenSkip ?? 'this adapter cannot reopen') : false },
      async () => {
        assert.ok(reopen !== undefined);
        const n = nodeName();
        const s = `node-${n}`;
        const cp = `contract-${n}`;
        const store = await harness.create();
        const events = [declarationSent(n, 1), reportReceived(n, 2)];
        const r = await store.append([{ stream: s, expected: 'no_stream', events }]);
        await store.setCheckpoint(cp, r.position!);
        await store.close();
        const again = await reopen(store);
        try {
          const read = await again.readStream(s);
          assert.deepEqual(
            ids(read),
            events.map((e) => e.id),
          );
          assert.deepEqual(
            read.map((e) => ({ type: e.type, data: e.data })),
            events.map(stripe),
          );
          assert.equal(await again.getCheckpoint(cp), r.position);
          const next = await again.append([{ stream: s, expected: 1n, events: [aliveSeen(n, 3)] }]);
          assert.ok(next.position! > r.position!, 'positions keep growing after reopen');
        } finally {
          await again.close();
        }
      },
    );

    storeStatsContract(withStore);
  });
}
