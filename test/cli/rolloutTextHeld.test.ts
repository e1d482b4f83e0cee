import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Recorded } from '../../src/core/events/index.ts';
import { rolloutDetail } from '../../src/cli/commands/rolloutText.ts';
import { createReadModel } from '../../src/readModel/readModel.ts';
import { createRolloutView } from '../../src/readModel/rollouts.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore } from '../support/history.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';

// `rollout status` prints a held timeout where the summary carries one (a serve that drives
// rollouts knows it); folded from the store alone it carries none, and the wave reads as before.

test('rollout status prints the open wave held past its timeout, and until when, when the summary says so', async () => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const r = rolloutInStore(store, h, 'cut', ['slow-1'], { waveTimeoutMs: 60_000 });
  await r.start();
  await r.run();
  const now = h.tick(5 * 60_000).getTime();
  const readModel = createReadModel({ now: () => now });
  const view = createRolloutView(readModel, { graceMs: 60_000 });
  const events: Recorded[] = [];
  for await (const batch of store.readAll()) events.push(...batch);
  readModel.apply(events);
  const folded = view.summary('cut', now)!;
  assert.equal(folded.waves[0]!.timeoutHeld, undefined, 'folded from the store, nothing is known of the driver');
  const plain = rolloutDetail(folded, [], now);
  assert.match(plain, /open, past its timeout/);
  assert.doesNotMatch(plain, /held/);

  const since = folded.waves[0]!.deadline!;
  const withHold = (held: NonNullable<(typeof folded.waves)[number]['timeoutHeld']>) => ({
    ...folded,
    waves: folded.waves.map((w) => ({ ...w, timeoutHeld: held })),
  });
  const cut = rolloutDetail(withHold({ since, until: null, reason: 'notObserving', graceMs: 60_000 }), [], now);
  assert.match(cut, new RegExp(`timeout held since ${since}: no report can arrive; decided 1m after an engine observes again`));
  const until = new Date(now + 30_000).toISOString();
  const grace = rolloutDetail(withHold({ since, until, reason: 'grace', graceMs: 60_000 }), [], now);
  assert.match(grace, new RegExp(`timeout held until ${until}: observed again, reports queued meanwhile still arriving`));
});
