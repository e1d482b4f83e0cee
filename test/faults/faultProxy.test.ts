import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import type { FaultProxy } from '../support/faults/faultProxy.ts';
import { until } from '../support/until.ts';

// The proxy between a client and a local server whose sockets the test holds, so each direction
// can be driven and observed on its own.

let server: net.Server;
let serverPort = 0;
const serverSockets: net.Socket[] = [];
let proxy: FaultProxy;

before(async () => {
  server = net.createServer((s) => {
    s.on('error', () => undefined);
    serverSockets.push(s);
    // Echo unless the test took the socket over (`s.removeAllListeners('data')`).
    s.on('data', (d) => s.write(d));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serverPort = (server.address() as AddressInfo).port;
  proxy = await createFaultProxy({ listenPort: 0, target: { host: '127.0.0.1', port: serverPort } });
});

after(async () => {
  await proxy.close();
  for (const s of serverSockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

type Client = { socket: net.Socket; received: () => Buffer; events: string[]; error: () => (Error & { code?: string }) | null };

async function connect(): Promise<Client> {
  const socket = net.connect({ host: proxy.host, port: proxy.port });
  const chunks: Buffer[] = [];
  const events: string[] = [];
  let error: (Error & { code?: string }) | null = null;
  socket.on('data', (d: Buffer) => chunks.push(d));
  socket.on('end', () => events.push('end'));
  socket.on('close', () => events.push('close'));
  socket.on('error', (e) => {
    error = e;
    events.push('error');
  });
  await new Promise<void>((r, j) => {
    socket.once('connect', r);
    socket.once('error', j);
  });
  return { socket, received: () => Buffer.concat(chunks), events, error: () => error };
}

/** Give the event loop and the kernel a window in which something that should not happen could. */
const settle = () => new Promise((r) => setTimeout(r, 150));

const lastServerSocket = async (countBefore: number): Promise<net.Socket> => {
  await until('the server to accept', () => serverSockets.length > countBefore);
  return serverSockets.at(-1) as net.Socket;
};

test('pass forwards bytes both ways unchanged, across backpressure, and counts them', async () => {
  proxy.pass();
  const before = proxy.counters();
  const c = await connect();
  const payload = randomBytes(4 * 1024 * 1024);
  c.socket.write(payload);
  await until('the echo', () => c.received().length >= payload.length);
  assert.equal(createHash('sha256').update(c.received()).digest('hex'), createHash('sha256').update(payload).digest('hex'));
  const after = proxy.counters();
  assert.equal(after.bytesToTarget - before.bytesToTarget, payload.length);
  assert.equal(after.bytesToClient - before.bytesToClient, payload.length);
  assert.equal(after.accepted - before.accepted, 1);
  c.socket.end();
  await until('a clean close', () => c.events.includes('close'));
  assert.equal(c.error(), null);
});

test('delay holds chunks in order until released, and pass releases them', async () => {
  proxy.pass();
  const c = await connect();
  proxy.delay(60 * 60 * 1000); // an hour: nothing can arrive by timing, only by pass()
  const before = proxy.counters().delayedChunks;
  for (const part of ['one,', 'two,', 'three']) c.socket.write(part);
  await until('the proxy to hold a chunk', () => proxy.counters().heldChunks > 0);
  await settle();
  assert.equal(c.received().length, 0);
  proxy.pass();
  await until('the released echo', () => c.received().toString() === 'one,two,three');
  assert.ok(proxy.counters().delayedChunks > before);
  c.socket.destroy();
});

test('a short delay still delivers everything, in order', async () => {
  proxy.delay(5);
  const c = await connect();
  const parts = Array.from({ length: 50 }, (_, i) => `${i};`);
  for (const p of parts) c.socket.write(p);
  await until('every delayed chunk', () => c.received().toString() === parts.join(''));
  proxy.pass();
  c.socket.destroy();
});

test('blackhole forwards nothing either way and closes nothing; pass delivers what was held', async () => {
  proxy.pass();
  const n = serverSockets.length;
  const c = await connect();
  const s = await lastServerSocket(n);
  s.removeAllListeners('data');
  const atServer: Buffer[] = [];
  s.on('data', (d: Buffer) => atServer.push(d));
  const serverEvents: string[] = [];
  s.on('end', () => serverEvents.push('end'));
  s.on('close', () => serverEvents.push('close'));
  c.socket.write('hello');
  await until('the first message', () => Buffer.concat(atServer).toString() === 'hello');

  proxy.blackhole();
  assert.equal(proxy.mode(), 'blackhole');
  c.socket.write('up');
  s.write('down');
  await settle();
  assert.equal(Buffer.concat(atServer).toString(), 'hello');
  assert.equal(c.received().length, 0);
  assert.deepEqual(c.events, []);
  assert.deepEqual(serverEvents, []);
  assert.equal(c.socket.destroyed || s.destroyed, false);

  proxy.pass();
  await until('the held bytes', () => Buffer.concat(atServer).toString() === 'helloup' && c.received().toString() === 'down');
  c.socket.destroy();
});

test('a client that gives up during a blackhole is not seen by the server until it heals', async () => {
  proxy.pass();
  const n = serverSockets.length;
  const c = await connect();
  const s = await lastServerSocket(n);
  const serverEvents: string[] = [];
  s.on('end', () => serverEvents.push('end'));
  s.on('close', () => serverEvents.push('close'));
  proxy.blackhole();
  c.socket.resetAndDestroy();
  await until('the client to close', () => c.events.includes('close'));
  await settle();
  assert.equal(serverEvents.join(), '');
  proxy.pass();
  await until('the server to learn', () => serverEvents.includes('close'));
});

test('reset destroys every open connection with RST, both sides, and the next connection works', async () => {
  proxy.pass();
  // Connections closed by earlier tests are gone from the proxy too (no leaked pairs).
  await until('earlier connections to be released', () => proxy.counters().active === 0);
  const n = serverSockets.length;
  const c1 = await connect();
  const c2 = await connect();
  const s2 = await lastServerSocket(n + 1);
  let serverError: (Error & { code?: string }) | null = null;
  s2.on('error', (e) => (serverError = e));
  const serverClosed = new Promise<void>((r) => s2.once('close', () => r()));
  const before = proxy.counters().reset;
  assert.equal(proxy.reset(), 2);
  await until('both clients to close', () => c1.events.includes('close') && c2.events.includes('close'));
  assert.equal(c1.error()?.code, 'ECONNRESET');
  assert.equal(c2.error()?.code, 'ECONNRESET');
  await serverClosed;
  assert.equal((serverError as (Error & { code?: string }) | null)?.code, 'ECONNRESET');
  assert.equal(proxy.counters().reset - before, 2);
  assert.equal(proxy.counters().active, 0);

  const c3 = await connect();
  c3.socket.write('again');
  await until('the echo after reset', () => c3.received().toString() === 'again');
  c3.socket.destroy();
});

test('refuse resets new connections until lifted; open ones are untouched', async () => {
  proxy.pass();
  const open = await connect();
  proxy.refuse(true);
  const before = proxy.counters().refused;
  const socket = net.connect({ host: proxy.host, port: proxy.port });
  const err = await new Promise<Error & { code?: string }>((r) => socket.once('error', r));
  assert.equal(err.code, 'ECONNRESET');
  assert.equal(proxy.counters().refused - before, 1);
  open.socket.write('still');
  await until('the open connection to work', () => open.received().toString() === 'still');
  proxy.refuse(false);
  const c = await connect();
  c.socket.write('back');
  await until('a new connection to work', () => c.received().toString() === 'back');
  c.socket.destroy();
  open.socket.destroy();
});

test('a target that refuses the connection is passed on to the client as a reset', async () => {
  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const p = await createFaultProxy({ target: { host: '127.0.0.1', port } });
  try {
    const socket = net.connect({ host: p.host, port: p.port });
    socket.write('anyone?');
    const outcome = await new Promise<string>((r) => {
      socket.once('error', (e: Error & { code?: string }) => r(e.code ?? 'error'));
      socket.once('end', () => r('end'));
    });
    assert.equal(outcome, 'ECONNRESET');
  } finally {
    await p.close();
  }
});

test('rewrite points an AMQP URL at the proxy and keeps credentials and vhost', () => {
  assert.equal(proxy.rewrite('amqp://u:p@broker:5672/%2Fv'), `amqp://u:p@${proxy.host}:${proxy.port}/%2Fv`);
  assert.throws(() => proxy.delay(-1), RangeError);
});
