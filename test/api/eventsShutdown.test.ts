import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiHarness, read } from '../support/apiHarness.ts';

// Found by the dashboard's browser test: a page left open holds /v1/events, and
// stopping `converge serve` waited for that client forever. Closing the app must end the streams
// (the client reconnects with Last-Event-ID to whichever engine answers next).

test('closing the app ends open event streams instead of waiting for their clients', async (t) => {
  const h = await apiHarness();
  let closed = false;
  t.after(async () => {
    if (!closed) await h.close();
  });
  const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  const res = await fetch(`${base}/v1/events`, { headers: read });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read(); // the stream is open: `retry` and a comment
  const ended = (async () => {
    for (;;) if ((await reader.read()).done) return true;
  })();
  const closing = h.close().then(() => (closed = true));
  const winner = await Promise.race([closing.then(() => 'closed'), new Promise((r) => setTimeout(() => r('still waiting'), 3_000))]);
  if (winner !== 'closed') await reader.cancel(); // let the close finish, so the failure is reported instead of hanging
  assert.equal(winner, 'closed');
  assert.equal(await ended, true);
});
