import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiHarness, read } from '../support/apiHarness.ts';
import { readSse } from '../support/sse.ts';
import type { SseEvent } from '../support/sse.ts';

type NodeData = { node: string; status: string; position: string };

/** The `node` events of a stream, read until `count` arrived. */
async function readEvents(res: Response, count: number): Promise<SseEvent<NodeData>[]> {
  const nodes = (es: readonly SseEvent<NodeData>[]) => es.filter((e) => e.event === 'node');
  return nodes(await readSse<NodeData>(res, (es) => nodes(es).length >= count));
}

test('/v1/events streams each state change with id = position, and resumes from Last-Event-ID', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  const base = await h.app.listen({ port: 0, host: '127.0.0.1' });

  const live = await fetch(`${base}/v1/events`, { headers: read });
  assert.equal(live.status, 200);
  assert.match(live.headers.get('content-type') ?? '', /text\/event-stream/);
  assert.equal(live.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(live.headers.get('cache-control'), 'no-store');
  const got = readEvents(live, 3);
  const a = await h.history.send('s1');
  await h.history.report('s1', { declared: a.digest, applied: ['web'] });
  await h.history.alive('s2');
  const events = await got;
  assert.deepEqual(
    events.map((e) => e.data.node),
    ['s1', 's1', 's2'],
  );
  assert.deepEqual(
    events.map((e) => e.data.status),
    ['behind', 'converged', 'undeclared'],
  );
  for (const e of events) assert.equal(e.id, e.data.position);

  // A client that saw only the first event resumes: it gets the current state of each node
  // that changed after that position, then live changes.
  const resumed = await fetch(`${base}/v1/events`, { headers: { ...read, 'last-event-id': events[0]!.id } });
  const more = readEvents(resumed, 3);
  await h.history.send('s3');
  const after = await more;
  assert.deepEqual(
    after.map((e) => e.data.node),
    ['s1', 's2', 's3'],
  );
  assert.equal(after[0]!.data.status, 'converged');
  const ids = after.map((e) => BigInt(e.id));
  assert.ok(ids[0]! > BigInt(events[0]!.id) && ids[1]! > ids[0]! && ids[2]! > ids[1]!, 'ids keep increasing across the resume');
});

test('/v1/events without a token is 401 and a bad Last-Event-ID is 400', async (t) => {
  const h = await apiHarness();
  t.after(() => h.close());
  assert.equal((await h.app.inject({ url: '/v1/events' })).statusCode, 401);
  const bad = await h.app.inject({ url: '/v1/events', headers: { ...read, 'last-event-id': 'x' } });
  assert.equal(bad.statusCode, 400);
});

test('1,000 resumes that fail after their headers each end their stream and leave no listener behind', async (t) => {
  // Every resume that threw kept its two listeners: after 300 of them a 1,000-node bulk POST took
  // 10.6 s instead of 0.4 s, each change written to streams nobody held.
  const inner = await apiHarness();
  const view = inner.runner.rollouts;
  let listeners = 0;
  const counted =
    <A extends unknown[]>(subscribe: (...args: A) => () => void) =>
    (...args: A): (() => void) => {
      listeners++;
      const off = subscribe(...args);
      let on = true;
      return () => {
        if (on) listeners--;
        on = false;
        off();
      };
    };
  const readModel = { ...inner.runner.readModel, onChange: counted(inner.runner.readModel.onChange) };
  const rollouts = {
    ...view,
    onChange: counted(view.onChange),
    // A rollout whose summary cannot be made (as one whose deadline was past the Date range could not).
    list: () => [{ id: 'broken' }] as unknown as ReturnType<typeof view.list>,
    summary: (): never => {
      throw new Error('the summary cannot be made');
    },
  };
  const h = await apiHarness({ readModel, rollouts });
  t.after(async () => {
    await h.close();
    await inner.close();
  });
  const before = listeners;
  for (let i = 0; i < 1_000; i++) {
    const r = await Promise.race([
      h.app.inject({ url: '/v1/events', headers: { ...read, 'last-event-id': '0' } }),
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 2_000).unref()),
    ]);
    assert.notEqual(r, 'hung', `resume ${i + 1} never ended its stream`);
    assert.equal(listeners, before, `resume ${i + 1} left ${listeners - before} listener(s) behind`);
  }
});
