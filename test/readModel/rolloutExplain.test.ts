import assert from 'node:assert/strict';
import { test } from 'node:test';
import { explainLine, explainRollout } from '../../src/readModel/rolloutExplain.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// The rollout's story from the events alone.

test('explain: when each wave opened and why, which report completed which node, and the stale report the clock rule would have counted', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  try {
    const previous = await h.send('slow', [{ id: 'web', image: 'nginx:1.26' }]);
    await h.send('b');
    await h.send('c');
    const r = rolloutInStore(store, h, 'r1', ['slow', 'b', 'c'], { waves: '1,100%', maxFailures: '1' });
    await r.start();
    await r.run();
    h.tick(300);
    await h.report('slow', { applied: ['web'], declared: previous.digest }); // the seed's race
    h.tick(200);
    await h.report('slow', { applied: ['web'], declared: await r.digestSentTo('slow') });
    h.tick(1_000);
    assert.deepEqual(await r.run(), ['completeWave', 'startWave', 'send', 'wait(2 node(s) of wave 2 still behind)']);
    await h.report('b', { refused: 'no room', declared: await r.digestSentTo('b') });
    h.tick(100);
    await h.report('c', { applied: ['web'], declared: await r.digestSentTo('c') });
    await r.run();

    const x = await explainRollout(store, 'r1');
    assert.equal(x.status, 'completed');
    assert.deepEqual(
      x.entries.map((e) => e.kind + ('node' in e ? ` ${e.node}` : '')),
      [
        'started',
        'waveOpened',
        'sent',
        'staleReport slow',
        'nodeDone slow',
        'waveCompleted',
        'waveOpened',
        'sent',
        'nodeFailed b',
        'nodeDone c',
        'waveCompleted',
        'completed',
      ],
    );
    const stale = x.entries[3]!;
    assert.ok(stale.kind === 'staleReport');
    assert.equal(stale.reported, previous.digest);
    assert.equal(stale.reportedSerial, 1);
    const done = x.entries[4]!;
    assert.ok(done.kind === 'nodeDone');
    assert.equal(done.latencyMs, 500);
    const second = x.entries[6]!;
    assert.ok(second.kind === 'waveOpened');
    assert.deepEqual(second.because, {
      wave: 1,
      size: 1,
      done: 1,
      failed: 0,
      superseded: 0,
      last: { node: 'slow', digest: await r.digestSentTo('slow'), at: done.at, position: done.position },
    });
    assert.match(
      explainLine(second),
      new RegExp(
        `wave 2 opened \\(2 nodes, targets 2–3\\) because 1 of 1 node\\(s\\) of wave 1 reported the digest this rollout sent them; the last, slow, reported ${(await r.digestSentTo('slow')).slice(0, 12)}`,
      ),
    );
    assert.match(explainLine(stale), /the clock rule would have counted it done, the digest rule keeps it pending/);
    await assert.rejects(explainRollout(store, 'nope'), /no rollout named "nope"/);
  } finally {
    await store.close();
  }
});
