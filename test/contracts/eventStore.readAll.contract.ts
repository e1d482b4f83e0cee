import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeRolloutEvent, rolloutSendId } from '../../src/core/events/index.ts';
import { readNodeColumns } from '../../src/store/index.ts';
import type { NewEvent } from '../../src/store/index.ts';
import type { Recorded } from '../../src/core/events/index.ts';
import { eventTime } from '../../projections/index.ts';
import { until } from '../support/until.ts';
import { aliveSeen, at, collectAll, declarationSent, ids, nodeName, reportReceived, rolloutStarted, stripe } from './eventStoreFixtures.ts';
import type { WithStore } from './eventStoreFixtures.ts';

// Reading the whole store in position order: readAll with its filters, the columnar read the bulk
// folds use, a rollout's stream, the head position. Part of the conformance suite
// (eventStore.contract.ts).

export function readAllContract(withStore: WithStore): void {
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
}
