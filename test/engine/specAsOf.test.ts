import assert from 'node:assert/strict';
import { test } from 'node:test';
import { specAsOf } from '../../src/engine/specAsOf.ts';
import { createSender } from '../../src/engine/send.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/core/events/index.ts';
import { isConvergeError } from '../../src/core/errors.ts';
import { historyInStore, testKey } from '../support/history.ts';

// Restore from history: the spec a node had been sent at a moment is the resources of the latest
// DeclarationSent in its stream at or before it, and sending it again gives the same spec digest.

/** What a moment without history is refused with (the API's; the CLI's is a usage error). */
const code = 'CONVERGE_ERR_BAD_REQUEST' as const;
/** "Now" for specAsOf: these tests are of time-to-position mapping, not of refusing a time to come. */
const farAhead = new Date(8.64e15);

test('the spec as of a time is the latest send at or before it, and sending it again restores the exact spec digest', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const specA = [{ id: 'web', image: 'nginx:1.26', ports: [80] }];
  const specB = [{ image: 'nginx:1.27', id: 'web', env: { B: '1', A: '2' } }, { id: 'db' }];
  await h.send('n1', specA);
  const tA = h.now();
  h.tick(60_000);
  await h.report('n1', { applied: ['web'] });
  h.tick(60_000);
  await h.send('n1', specB);
  const tB = h.now();
  h.tick(60_000);
  await h.send('n1', [{ id: 'web', image: 'broken' }]);

  const sends = (await store.readStream(streamOf('n1'))).filter((e) => e.type === 'DeclarationSent') as Recorded<DeclarationSent>[];
  const [a, b] = sends;
  assert.equal(
    (await specAsOf(store, 'n1', { at: tA }, farAhead, code)).specDigest,
    a!.data.specDigest,
    'at the very time of a send: that send',
  );
  const mid = await specAsOf(store, 'n1', { at: new Date(tB.getTime() + 30_000) }, farAhead, code);
  assert.equal(mid.serial, 2);
  assert.equal(mid.specDigest, b!.data.specDigest);
  assert.equal(mid.position, b!.position);

  const again = await createSender({ store, key: testKey }).send('n1', mid.resources);
  const stored = (await store.readStream(streamOf('n1'))).at(-1) as Recorded<DeclarationSent>;
  assert.equal(stored.data.serial, 4, 'a new serial');
  assert.equal(stored.data.specDigest, b!.data.specDigest, 'the exact resources of serial 2, byte-equal by spec digest');
  assert.equal(again.digest, stored.data.digest);

  await assert.rejects(specAsOf(store, 'n1', { at: new Date(tA.getTime() - 1) }, farAhead, code), (e) => {
    assert.ok(isConvergeError(e, 'CONVERGE_ERR_NODE_NOT_FOUND'));
    assert.match(e.message, /n1 had been sent no declaration at or before 2026-/);
    return true;
  });
  await assert.rejects(specAsOf(store, 'nobody', { at: tB }, farAhead, code), (e) => isConvergeError(e, 'CONVERGE_ERR_NODE_NOT_FOUND'));
});

test('time maps to position by stream order: a send stamped earlier than one before it is never chosen past that one', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  await h.send('n1', [{ id: 'a' }]);
  h.tick(10_000);
  const t = h.now();
  h.tick(10_000);
  await h.send('n1', [{ id: 'b' }]); // stamped after t
  h.tick(-15_000); // another engine's clock, behind
  await h.send('n1', [{ id: 'c' }]); // stamped before t, but stored after b
  const got = await specAsOf(store, 'n1', { at: t }, farAhead, code);
  assert.deepEqual(got.resources, [{ id: 'a' }], 'the stream up to its first event after t: c, stored after b, is past it');
});
