import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { ConvergeError } from '../../src/core/errors.ts';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';

// A server that takes the TCP connection and never answers the startup (a partition after the
// handshake, a wedged proxy): the store's first use opens the schema on a connection of its own,
// outside the pool, and that connect must be bounded like the pool's, or the engine hangs at start.

test('the first use of a store whose server never answers fails with STORE_UNAVAILABLE, not hangs', { timeout: 60_000 }, async () => {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => void sockets.add(s)).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as net.AddressInfo;
  const store = createPostgresEventStore(`postgres://postgres@127.0.0.1:${port}/test`, { connectTimeoutMs: 300 });
  try {
    await assert.rejects(
      store.readStream('node-x'),
      (err: unknown) => err instanceof ConvergeError && err.code === 'CONVERGE_ERR_STORE_UNAVAILABLE',
    );
    await assert.rejects(store.append([{ stream: 'node-x', expected: 'any', events: [] }]), (err: unknown) => err instanceof ConvergeError);
  } finally {
    await store.close().catch(() => undefined);
    for (const s of sockets) s.destroy();
    server.close();
  }
});
