import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { createPostgresEventStore } from '../../src/store/postgres/index.ts';
import { describeOnPostgres, scratchSchema } from '../support/postgres.ts';
import { until } from '../support/until.ts';
import { batchWrites } from './fixtures/sqliteAppender.ts';

// A pooled connection whose packets were dropped by a partition (no FIN, no RST) does not come
// back when the network does: its bytes wait for the kernel's next retransmission, which after a
// long cut is minutes away, so a query on it waits that long, and a full pool of such connections
// holds every later statement behind them (the partition scenario's engine, which answered no
// POST for 90 s after the heal). Here a proxy the test controls freezes the connections open
// through it, forwarding nothing and closing nothing, for good: the store must give up on them
// and serve later statements on fresh connections.

type Proxy = Readonly<{
  url: (storeUrl: string) => string;
  /** Stop forwarding on every connection open now (new ones: while `darkNew`), closing nothing. */
  freeze: () => void;
  /** Whether new connections are frozen from the start too (a cut), or pass (the heal). */
  darkNew: (on: boolean) => void;
  /** Connections taken so far. */
  accepted: () => number;
  close: () => Promise<void>;
}>;

async function startProxy(target: URL): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  const live = new Set<() => void>();
  let dark = false;
  let accepted = 0;
  const server = net.createServer((down) => {
    accepted++;
    const up = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    const freeze = (): void => {
      down.unpipe(up);
      up.unpipe(down);
      down.pause();
      up.pause();
    };
    if (dark) return freeze();
    down.pipe(up);
    up.pipe(down);
    // An end or a reset stays one while the path is up.
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
    live.add(freeze);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (storeUrl) => {
      const u = new URL(storeUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    freeze: () => {
      for (const f of live) f();
      live.clear();
    },
    darkNew: (on) => {
      dark = on;
    },
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const settled = <T>(p: Promise<T>): { done: () => boolean; outcome: () => PromiseSettledResult<T> | undefined } => {
  let outcome: PromiseSettledResult<T> | undefined;
  p.then(
    (value) => (outcome = { status: 'fulfilled', value }),
    (reason: unknown) => (outcome = { status: 'rejected', reason }),
  );
  return { done: () => outcome !== undefined, outcome: () => outcome };
};

describeOnPostgres('PostgreSQL store whose pooled connections went dark', () => {
  const scratch = scratchSchema('converge_dark');
  after(() => scratch.drop());

  test('statements on dead connections fail STORE_UNAVAILABLE and the next ones run on fresh connections', async () => {
    const proxy = await startProxy(new URL(scratch.url));
    const poolSize = 2;
    // Shorter bounds than the defaults (docs/operations.md), still well above a busy machine's statement.
    const store = createPostgresEventStore(proxy.url(scratch.url), { poolSize, queryTimeoutMs: 5_000, connectTimeoutMs: 5_000 });
    try {
      // Both pooled connections open (two appends at once check out two), then the cut.
      await Promise.all([0, 1].map((b) => store.append(batchWrites('dark', b))));
      proxy.freeze();
      proxy.darkNew(true);
      // One statement per pooled connection, each left waiting for an answer that never comes (an
      // append of one statement, and a write of no events, which takes the careful path's
      // transaction), and one queued behind them.
      const onDead = [
        settled(store.append(batchWrites('dark', 2))),
        settled(store.append([{ stream: 'node-crash-0', expected: 'any', events: [] }])),
      ];
      const queued = settled(store.append(batchWrites('dark', 4)));
      await until('the statements on the dead connections to fail', () => onDead.every((s) => s.done()), 60_000);
      for (const s of onDead) {
        const o = s.outcome()!;
        assert.equal(o.status, 'rejected');
        assert.equal((o as PromiseRejectedResult).reason.code, 'CONVERGE_ERR_STORE_UNAVAILABLE');
      }
      // The heal: new connections pass, the frozen ones stay dark for good.
      proxy.darkNew(false);
      await until(
        'an append after the heal to be stored',
        async () => {
          try {
            await store.append(batchWrites('dark', 5));
            return true;
          } catch {
            return false;
          }
        },
        60_000,
      );
      await until('the queued append to be answered', () => queued.done(), 60_000);
      assert.ok((await store.headPosition()) !== null);
      const ids = new Set<string>();
      for await (const page of store.readAll()) for (const e of page) ids.add(e.id);
      for (const b of [0, 1, 5])
        for (const w of batchWrites('dark', b)) for (const e of w.events) assert.ok(ids.has(e.id), `batch ${b} stored`);
    } finally {
      await proxy.close();
      await store.close();
    }
  });

  // The relay lease has a connection of its own, opened again after each loss: one opened into
  // the cut must be given up like a pooled one, or the engine never competes for the lease again.
  test('a lease connection opened into the cut is given up, and the lease is taken after the heal', { timeout: 90_000 }, async () => {
    const proxy = await startProxy(new URL(scratch.url));
    const store = createPostgresEventStore(proxy.url(scratch.url), { connectTimeoutMs: 1_000, lease: { retryMs: 100 } });
    const stop = new AbortController();
    try {
      await store.append(batchWrites('dark-lease', 0));
      proxy.darkNew(true);
      const before = proxy.accepted();
      const holding = settled(store.acquireLease!('dark-lease', stop.signal));
      await until('the lease to open a connection into the cut', () => proxy.accepted() > before, 30_000);
      proxy.darkNew(false);
      await until('the lease to be taken after the heal', () => holding.done(), 60_000);
      const o = holding.outcome()!;
      assert.equal(o.status, 'fulfilled');
      const hold = (o as PromiseFulfilledResult<Awaited<ReturnType<NonNullable<typeof store.acquireLease>>>>).value;
      assert.ok(hold !== null, 'the lease is held');
      await hold.release();
    } finally {
      stop.abort();
      await proxy.close();
      await store.close();
    }
  });

  // A standby's lease connection, waiting its turn, goes dark: its next read of the lease waits for
  // an answer that never comes. Unbounded, the standby never competes again, and the fleet has no
  // relay once the holder goes; the read is given up within the lease's ttl, and the connection with it.
  test('a standby whose lease connection went dark takes the lease once the holder lets go', { timeout: 90_000 }, async () => {
    const proxy = await startProxy(new URL(scratch.url));
    const holder = createPostgresEventStore(scratch.url);
    const standby = createPostgresEventStore(proxy.url(scratch.url), { connectTimeoutMs: 1_000, lease: { retryMs: 100, ttlMs: 3_000 } });
    const stop = new AbortController();
    try {
      const held = await holder.acquireLease!('dark-standby', stop.signal);
      assert.ok(held !== null);
      // The standby's schema is opened first, so the next connection through the proxy is its lease's.
      await standby.append(batchWrites('dark-standby', 0));
      const before = proxy.accepted();
      const waiting = settled(standby.acquireLease!('dark-standby', stop.signal));
      await until('the standby to open its lease connection through the proxy', () => proxy.accepted() > before, 30_000);
      proxy.freeze();
      await held.release();
      await until('the standby to take the lease', () => waiting.done(), 60_000);
      const o = waiting.outcome()!;
      assert.equal(o.status, 'fulfilled');
      const hold = (o as PromiseFulfilledResult<Awaited<ReturnType<NonNullable<typeof standby.acquireLease>>>>).value;
      assert.ok(hold !== null, 'the standby holds the lease');
      await hold.release();
    } finally {
      stop.abort();
      await proxy.close();
      await holder.close();
      await standby.close();
    }
  });
});
