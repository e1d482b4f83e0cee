import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { createManagementClient } from '../../src/brokerAdmin/managementClient.ts';

// A kept-alive connection the broker closed while this process was busy (a long synchronous step
// keeps fetch from noticing) fails the next request at the socket, before any answer. Every
// management call is idempotent, so one such failure is tried again on a fresh connection.

async function serverDroppingFirst(drops: number): Promise<{ url: string; seen: () => number; close: () => Promise<void> }> {
  let seen = 0;
  const server = createServer((req, res) => {
    seen++;
    if (seen <= drops) {
      req.socket.destroy();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen: () => seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

test('a request whose connection drops before any answer is tried once more', async () => {
  const s = await serverDroppingFirst(1);
  try {
    const client = createManagementClient({ managementUrl: s.url });
    const r = await client.request('PUT', '/vhosts/x', {});
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { ok: true });
    assert.equal(s.seen(), 2);
  } finally {
    await s.close();
  }
});

test('a connection dropped twice in a row is an error naming the request', async () => {
  const s = await serverDroppingFirst(2);
  try {
    const client = createManagementClient({ managementUrl: s.url });
    await assert.rejects(client.request('GET', '/overview'), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'CONVERGE_ERR_BROKER_ADMIN');
      assert.match(e.message, /cannot be reached/);
      return true;
    });
    assert.equal(s.seen(), 2);
  } finally {
    await s.close();
  }
});
