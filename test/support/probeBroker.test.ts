import assert from 'node:assert/strict';
import { createServer, connect } from 'node:net';
import type { Server, Socket } from 'node:net';
import { after, test } from 'node:test';
import { defaultBroker, describeOnBroker, probeBroker } from './broker.ts';

// The probe that decides whether a broker suite runs. Under load (CI's parallel group, a broker
// busy with another suite) one AMQP handshake can take longer than one attempt's timeout: the
// probe then tries again instead of failing every suite behind it (CI sets CONVERGE_REQUIRE_BROKER).

/** A TCP proxy to the real broker that holds the first `silent` connections open and never answers them. */
async function proxyThatStallsFirst(silent: number): Promise<{ url: string; server: Server; close: () => Promise<void> }> {
  const target = new URL(defaultBroker.amqpUrl);
  const held: Socket[] = [];
  let seen = 0;
  const server = createServer((client) => {
    if (seen++ < silent) {
      held.push(client);
      client.on('error', () => {});
      return;
    }
    const upstream = connect(Number(target.port || 5672), target.hostname);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const url = `amqp://${target.username}:${target.password}@127.0.0.1:${port}`;
  return {
    url,
    server,
    close: async () => {
      for (const s of held) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describeOnBroker('probeBroker', () => {
  test('a handshake that stalls once is tried again, and the broker is reachable', async () => {
    const proxy = await proxyThatStallsFirst(1);
    after(() => proxy.close());
    const answer = await probeBroker({ ...defaultBroker, amqpUrl: proxy.url }, { attempts: 3, timeoutMs: 300 });
    assert.deepEqual(answer, { ok: true });
  });

  test('a broker that never answers is unreachable after the attempts, and the reason says how many', async () => {
    const proxy = await proxyThatStallsFirst(Number.MAX_SAFE_INTEGER);
    after(() => proxy.close());
    const answer = await probeBroker({ ...defaultBroker, amqpUrl: proxy.url }, { attempts: 2, timeoutMs: 200 });
    assert.equal(answer.ok, false);
    assert.match(answer.ok ? '' : answer.reason, /2 attempts/);
  });
});
