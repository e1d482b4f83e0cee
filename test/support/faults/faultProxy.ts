import net from 'node:net';
import type { AddressInfo } from 'node:net';

// A TCP proxy to put between the engine and the broker and break on purpose. Faults act on
// every connection through it, open or new:
// - pass:      forward both ways;
// - delay:     hold each chunk `ms` before forwarding (order kept), like a slow link;
// - blackhole: forward nothing either way and close nothing, like a partition: both peers keep
//              their sockets and only notice through AMQP heartbeats (or never, without them).
//              Bytes already read are held, and the kernel's buffers fill behind them, as with
//              TCP retransmitting into a dead path; `pass()` lets them through, in order.
// - reset:     destroy every open connection with RST (not FIN), like a crashed peer or a
//              middlebox dropping state; new connections are accepted again at once.
// - refuse:    new connections are reset as soon as they are accepted (broker down), until lifted.

export type FaultMode = 'pass' | 'delay' | 'blackhole';

export type FaultProxyOptions = Readonly<{
  listenPort?: number;
  listenHost?: string;
  target: Readonly<{ host: string; port: number }>;
}>;

export type FaultProxyCounters = Readonly<{
  accepted: number;
  active: number;
  refused: number;
  /** Connections destroyed by `reset()` (each counts once, for both of its sockets). */
  reset: number;
  bytesToTarget: number;
  bytesToClient: number;
  /** Chunks forwarded after a delay. */
  delayedChunks: number;
  /** Chunks currently held by a blackhole or a delay. */
  heldChunks: number;
}>;

export type FaultProxy = Readonly<{
  host: string;
  port: number;
  /** amqp://user:pass@host:port/vhost rewritten to go through the proxy. */
  rewrite: (url: string) => string;
  mode: () => FaultMode;
  pass: () => void;
  delay: (ms: number) => void;
  blackhole: () => void;
  /** RST every open connection; returns how many were reset. */
  reset: () => number;
  refuse: (on: boolean) => void;
  counters: () => FaultProxyCounters;
  close: () => Promise<void>;
}>;

type Item = { chunk: Buffer; due: number; delayed: boolean } | { end: true; due: number; delayed: boolean };

type Pipe = {
  queue: Item[];
  timer: NodeJS.Timeout | null;
  waitingDrain: boolean;
};

type Pair = {
  client: net.Socket;
  upstream: net.Socket;
  toTarget: Pipe;
  toClient: Pipe;
  closed: boolean;
  /** One side failed during a blackhole: the other learns only when the path heals (then RST). */
  resetWhenHealed: boolean;
};

export async function createFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  let mode: FaultMode = 'pass';
  let delayMs = 0;
  let refusing = false;
  const pairs = new Set<Pair>();
  const c = { accepted: 0, refused: 0, reset: 0, bytesToTarget: 0, bytesToClient: 0, delayedChunks: 0 };

  const newPipe = (): Pipe => ({ queue: [], timer: null, waitingDrain: false });

  /** Move what is due from src's queue to dst, respecting the mode and dst's backpressure. */
  function pump(pair: Pair, pipe: Pipe, src: net.Socket, dst: net.Socket, toTarget: boolean): void {
    if (pipe.timer) {
      clearTimeout(pipe.timer);
      pipe.timer = null;
    }
    if (pair.closed) return;
    if (pair.resetWhenHealed && mode !== 'blackhole') {
      drop(pair, true);
      return;
    }
    if (mode === 'blackhole') {
      src.pause();
      return;
    }
    const now = Date.now();
    while (pipe.queue.length > 0 && !pipe.waitingDrain) {
      const head = pipe.queue[0] as Item;
      if (head.due > now) {
        pipe.timer = setTimeout(() => pump(pair, pipe, src, dst, toTarget), head.due - now);
        break;
      }
      pipe.queue.shift();
      if ('end' in head) {
        dst.end();
        continue;
      }
      if (head.delayed) c.delayedChunks++;
      if (toTarget) c.bytesToTarget += head.chunk.length;
      else c.bytesToClient += head.chunk.length;
      if (!dst.write(head.chunk)) {
        pipe.waitingDrain = true;
        dst.once('drain', () => {
          pipe.waitingDrain = false;
          pump(pair, pipe, src, dst, toTarget);
        });
      }
    }
    // Read more only when nothing is waiting on the far side: backpressure crosses the proxy.
    if (pipe.queue.length === 0 && !pipe.waitingDrain) src.resume();
    else src.pause();
  }

  function wire(pair: Pair, src: net.Socket, dst: net.Socket, pipe: Pipe, toTarget: boolean): void {
    src.on('data', (chunk: Buffer) => {
      const delayed = mode === 'delay' && delayMs > 0;
      pipe.queue.push({ chunk, due: delayed ? Date.now() + delayMs : 0, delayed });
      pump(pair, pipe, src, dst, toTarget);
    });
    src.on('end', () => {
      const delayed = mode === 'delay' && delayMs > 0;
      pipe.queue.push({ end: true, due: delayed ? Date.now() + delayMs : 0, delayed });
      pump(pair, pipe, src, dst, toTarget);
    });
  }

  function drop(pair: Pair, rst: boolean): void {
    if (pair.closed) return;
    pair.closed = true;
    pairs.delete(pair);
    for (const p of [pair.toTarget, pair.toClient]) if (p.timer) clearTimeout(p.timer);
    for (const s of [pair.client, pair.upstream]) {
      if (rst && !s.destroyed) s.resetAndDestroy();
      else s.destroy();
    }
  }

  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    c.accepted++;
    client.on('error', () => undefined);
    if (refusing) {
      c.refused++;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect({ host: options.target.host, port: options.target.port });
    upstream.on('error', () => undefined);
    upstream.pause();
    const pair: Pair = { client, upstream, toTarget: newPipe(), toClient: newPipe(), closed: false, resetWhenHealed: false };
    pairs.add(pair);
    wire(pair, client, upstream, pair.toTarget, true);
    wire(pair, upstream, client, pair.toClient, false);
    // A clean close travels as FIN through the pipes (the `end` items), so data queued before it
    // is still delivered; an error is passed on as RST so the peer sees what the proxy saw —
    // except across a blackhole, where nothing crosses until it heals.
    const onClose = (hadError: boolean): void => {
      if (client.destroyed && upstream.destroyed) drop(pair, false);
      else if (hadError) {
        if (mode === 'blackhole') pair.resetWhenHealed = true;
        else drop(pair, true);
      }
    };
    client.on('close', onClose);
    upstream.on('close', onClose);
    upstream.once('connect', () => {
      pump(pair, pair.toTarget, client, upstream, true);
      pump(pair, pair.toClient, upstream, client, false);
    });
  });
  server.on('error', () => undefined);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort ?? 0, options.listenHost ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;

  const repumpAll = (): void => {
    for (const pair of pairs) {
      pump(pair, pair.toTarget, pair.client, pair.upstream, true);
      pump(pair, pair.toClient, pair.upstream, pair.client, false);
    }
  };

  return {
    host: address.address,
    port: address.port,
    rewrite: (url) => {
      const u = new URL(url);
      u.hostname = address.address;
      u.port = String(address.port);
      return u.toString();
    },
    mode: () => mode,
    pass: () => {
      mode = 'pass';
      delayMs = 0;
      // Chunks queued under a delay keep their order; release them now.
      for (const pair of pairs) for (const p of [pair.toTarget, pair.toClient]) for (const item of p.queue) item.due = 0;
      repumpAll();
    },
    delay: (ms) => {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`delay must be a non-negative number of ms, got ${ms}`);
      mode = 'delay';
      delayMs = ms;
      repumpAll();
    },
    blackhole: () => {
      mode = 'blackhole';
      repumpAll();
    },
    reset: () => {
      const n = pairs.size;
      for (const pair of [...pairs]) drop(pair, true);
      c.reset += n;
      return n;
    },
    refuse: (on) => {
      refusing = on;
    },
    counters: () => ({
      ...c,
      active: pairs.size,
      heldChunks: [...pairs].reduce((n, p) => n + p.toTarget.queue.length + p.toClient.queue.length, 0),
    }),
    close: async () => {
      for (const pair of [...pairs]) drop(pair, false);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
