import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeObservationStarted, makeObservationStopped } from '../../src/core/events/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { historyInStore, recordObservation, testKey } from '../support/history.ts';
import { oneWaveRollout } from '../support/oneWaveRollout.ts';
import { rolloutInStore } from '../support/rolloutInStore.ts';
import { serveInProcess } from '../support/serveInProcess.ts';
import { readSse } from '../support/sse.ts';
import { until } from '../support/until.ts';

// While the driver holds a wave's timeout because no report can arrive (docs/design.md §8
// "Timeouts while not observed"), the serve's rollout answer says so on the open wave, and until
// when it waits at least: a wave open past its timeout otherwise reads as a decision forgotten.

type Held = { since: string; until: string | null; reason: string; graceMs: number } | null | undefined;
type Wave = { wave: number; deadline: string | null; completedAt: string | null; timeoutHeld?: Held };

test('GET /v1/rollouts/:id says a wave past its timeout is held while no engine observes, then until when', async (t) => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  // The only engine observing lost its broker: no report reaches the store from now on.
  await recordObservation(store, makeObservationStarted('engine-a', h.now().getTime(), 1_000, null));
  await h.heard('slow-1');
  await recordObservation(store, makeObservationStopped('engine-a', Date.now(), 'broker-lost'));
  const { engine, url } = await serveInProcess(t, store, {
    // A grace long enough to be seen: the driver reads the record's spans at most every second.
    settings: { apiTokens: 'operator-token:read,send', graceMs: '5000', lastSeenFlushMs: '200' },
    key: testKey,
    caughtUp: true,
  });
  const headers = { authorization: 'Bearer operator-token' };
  const started = await engine.app.inject({
    method: 'POST',
    url: '/v1/rollouts',
    headers: { ...headers, 'content-type': 'application/json' },
    payload: JSON.stringify(oneWaveRollout('cut', ['slow-1'], 300)),
  });
  assert.equal(started.statusCode, 202, started.body);
  const wave = async (): Promise<Wave> => {
    const res = await engine.app.inject({ method: 'GET', url: '/v1/rollouts/cut', headers });
    assert.equal(res.statusCode, 200, res.body);
    return (res.json() as { waves: Wave[] }).waves[0]!;
  };
  const open = await until('the wave sent', async () => {
    const w = await wave();
    return w.deadline === null ? null : w;
  });
  assert.equal(open.timeoutHeld, null, 'before its timeout the wave is not held');
  // No event marks a hold's start: the stream is sent the rollout again when the driver holds it.
  let pushed = false;
  const res = await fetch(`${url}/v1/events?rollout=cut`, { headers });
  const reading = readSse<{ waves: Wave[] }>(
    res,
    (evs) => (pushed = evs.some((e) => e.event === 'rollout' && e.data.waves[0]?.timeoutHeld?.reason === 'notObserving')),
  );
  await until('the timeout past', () => Date.now() > Date.parse(open.deadline!));
  for (let i = 0; i < 2; i++) await engine.rollouts!.nextRound();

  const held = (await wave()).timeoutHeld;
  assert.ok(held, 'a wave past its timeout says it is held');
  assert.equal(held.reason, 'notObserving');
  assert.equal(held.until, null, 'not until an engine observes again');
  assert.equal(held.graceMs, 5_000);
  assert.ok(Date.parse(held.since) >= Date.parse(open.deadline!), 'held from its timeout on');
  await until('the event stream to say the wave is held', () => pushed);
  await reading;

  // An engine observes again: the timeout waits a grace more, and says until when.
  await recordObservation(store, makeObservationStarted('engine-a', Date.now(), 1_000, null));
  const seen = await until('the hold to name its end, or the rollout to halt', async () => {
    const res = await engine.app.inject({ method: 'GET', url: '/v1/rollouts/cut', headers });
    const r = res.json() as { status: string; waves: Wave[] };
    return r.status !== 'running' || r.waves[0]!.timeoutHeld?.reason === 'grace' ? r : null;
  });
  assert.equal(seen.status, 'running', 'held a grace after an engine observes again, and said so');
  const grace = seen.waves[0]!.timeoutHeld!;
  assert.ok(grace.until !== null && Date.parse(grace.until) > Date.parse(open.deadline!), grace.until ?? 'null');
  assert.equal(grace.since, held.since, 'one hold, from the timeout on');

  await until('the rollout to halt', async () => {
    const res = await engine.app.inject({ method: 'GET', url: '/v1/rollouts/cut', headers });
    return (res.json() as { status: string }).status === 'halted';
  });
  assert.equal((await wave()).timeoutHeld ?? null, null, 'a decided wave holds nothing');
});

test('an engine that does not drive rollouts leaves timeoutHeld out: it cannot know', async (t) => {
  const store = createMemoryEventStore();
  const h = historyInStore(store);
  const r = rolloutInStore(store, h, 'elsewhere', ['slow-1'], { waveTimeoutMs: 60_000 });
  await r.start();
  await r.run();
  const { engine } = await serveInProcess(t, store, {
    settings: { apiTokens: 'operator-token:read' },
    key: testKey,
    caughtUp: true,
    driveRollouts: false,
  });
  const res = await engine.app.inject({
    method: 'GET',
    url: '/v1/rollouts/elsewhere',
    headers: { authorization: 'Bearer operator-token' },
  });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json() as { status: string; waves: Wave[] };
  assert.equal(body.status, 'running');
  assert.notEqual(body.waves[0]!.deadline, null, 'the wave is open, all sent');
  assert.equal('timeoutHeld' in body.waves[0]!, false);
});
