import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { createSender } from '../../src/engine/send.ts';
import type { SendResult } from '../../src/engine/send.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { streamOf } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import { historyInStore, testKey } from '../support/history.ts';

// A node that reports every few milliseconds moves its own stream all the time; a send to it
// must still be recorded (it used to answer 409 after 5 attempts, each re-reading the whole
// stream while the node's reports kept landing), and what the expected revision guards must
// still hold: serials one apart in stream order, and no declaration assigning a port the latest
// report before it carries.

/** A store whose reads cost one turn of the event loop per 50 events, as decoding rows (or receiving them) does. */
function readsCostTurns(store: EventStore): EventStore {
  const readStream = store.readStream.bind(store);
  store.readStream = async (stream, options) => {
    const events = await readStream(stream, options);
    for (let i = 0; i < Math.ceil(events.length / 50); i++) await turn();
    return events;
  };
  return store;
}

/** Reports from `node` appended back to back, one every third turn, carrying port 8080 in every third one, until stopped. */
function reporting(store: EventStore, node: string) {
  const h = historyInStore(store);
  let stop = false;
  let n = 0;
  const done = (async () => {
    while (!stop) {
      await h.report(node, { carried: n++ % 3 === 0 ? [8080] : [] });
      for (let i = 0; i < 3; i++) await turn();
    }
  })();
  return {
    seed: async (count: number) => {
      for (let i = 0; i < count; i++) await h.report(node, { carried: [] });
    },
    stop: async () => {
      stop = true;
      await done;
      return n;
    },
  };
}

function checkGuards(events: Awaited<ReturnType<EventStore['readStream']>>): number {
  let serial = 0;
  let carried: readonly number[] = [];
  for (const e of events) {
    if (e.type === 'ReportReceived') carried = e.data.carried;
    if (e.type !== 'DeclarationSent') continue;
    assert.equal(e.data.serial, serial + 1, `serial ${e.data.serial} follows ${serial} at revision ${e.revision}`);
    serial = e.data.serial;
    const resources = JSON.parse(Buffer.from(e.data.declaration, 'base64').toString('utf8')).resources as { ports?: number[] }[];
    for (const port of resources.flatMap((r) => r.ports ?? []))
      assert.ok(!carried.includes(port), `serial ${serial} assigns port ${port}, carried by the report before it`);
  }
  return serial;
}

test('sends to a node whose reports land back to back are recorded, serials one apart, no carried port assigned', async () => {
  const store = readsCostTurns(createMemoryEventStore());
  const node = 'chatty';
  const reports = reporting(store, node);
  await reports.seed(2000); // a node that has been reporting for a while: its whole stream is long
  const sender = createSender({ store, key: testKey });
  const results: SendResult[] = [];
  let carriedRefusals = 0;
  let reported: number;
  try {
    for (let round = 0; round < 6; round++) {
      // Two operators at once: one of them loses the serial to the other and takes the next.
      const answers = await Promise.allSettled([
        sender.send(node, [{ id: 'web', image: `web:${round}` }]),
        sender.send(node, [{ id: 'api', ports: [8080] }]),
      ]);
      for (const a of answers) {
        if (a.status === 'fulfilled') results.push(a.value);
        else if (isConvergeError(a.reason, 'CONVERGE_ERR_PORT_CARRIED')) carriedRefusals++;
        else throw a.reason;
      }
    }
  } finally {
    reported = await reports.stop();
  }
  assert.ok(reported > 20, `the node kept reporting during the sends (${reported} reports)`);
  assert.ok(
    results.length > 6 && carriedRefusals > 0,
    `both answers to the port's send were seen: ${results.length} recorded, ${carriedRefusals} refused`,
  );
  assert.equal(results.length + carriedRefusals, 12);
  const events = await store.readStream(streamOf(node));
  assert.equal(checkGuards(events), results.length);
  assert.deepEqual(
    results.map((r) => r.serial).sort((a, b) => a - b),
    results.map((_, i) => i + 1),
  );
  assert.equal(foldNodeEvents(node, events).sent?.serial, results.length);
});

test('a view from a lagging read model is brought up to date from the store, not re-read from the start', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.send('n1');
  await h.report('n1', { carried: [] });
  const stale = foldNodeEvents('n1', await store.readStream(streamOf('n1')));
  await h.send('n1');
  await h.report('n1', { carried: [8080] });
  const reads: (bigint | undefined)[] = [];
  const readStream = store.readStream.bind(store);
  store.readStream = async (stream, options) => {
    // The node's stream; the `holds` stream (pins, read before each direct send) is another matter.
    if (stream === streamOf('n1')) reads.push(options?.fromRevision);
    return readStream(stream, options);
  };
  const sender = createSender({ store, key: testKey, loadNode: async () => stale });
  await assert.rejects(sender.send('n1', [{ id: 'web', ports: [8080] }]), (e) => isConvergeError(e, 'CONVERGE_ERR_PORT_CARRIED'));
  const r = await sender.send('n1', [{ id: 'web', ports: [9090] }]);
  assert.equal(r.serial, 3);
  assert.ok(
    reads.every((from) => from === stale.revision + 1n),
    `every read started after the view: ${reads.join(', ')}`,
  );
});
