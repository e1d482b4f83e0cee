import type { FastifyReply } from 'fastify';
import { ConvergeError } from '../core/errors.ts';
import type { Metrics } from '../metrics.ts';

// One read token opened 20,000 event streams, the process reached its file
// descriptor limit and every new client, /healthz included, was reset. Requests that stay open —
// an event stream, an await — are counted here, per client and for the whole engine, and one
// over a cap is refused before it holds anything: 429 when the client holds its share (Retry-After:
// its own streams must end first), 503 when the engine holds its share (Retry-After: someone's
// must). A client is its token; with reads open (no tokens configured), its address.
//
// Why not @fastify/rate-limit or @fastify/under-pressure: rate-limit counts requests per time
// window, and a stream is one request that lasts for hours (20,000 streams opened over a morning
// pass any window that lets a dashboard reconnect); under-pressure sheds every route, probes
// included, on event-loop delay, heap or RSS, which idle streams barely move until descriptors run
// out. What is needed is a count of what is open, released when it closes: this file.

export type CapKind = 'stream' | 'await';

export type ConnectionCaps = Readonly<{
  /** Event streams (GET /v1/events) open at once, the whole engine. */
  streams: number;
  /** Event streams one client may hold open. */
  streamsPerClient: number;
  /** Awaits (GET /v1/nodes/:node/await) open at once, the whole engine. */
  awaits: number;
  /** Awaits one client may hold open. */
  awaitsPerClient: number;
  /** The Retry-After of a refusal, in seconds. */
  retryAfterSeconds: number;
}>;

/** The defaults of `serve` (src/app/config.ts holds the same numbers as flag defaults). */
export const defaultCaps: ConnectionCaps = {
  streams: 1_000,
  streamsPerClient: 10,
  awaits: 1_000,
  awaitsPerClient: 100,
  retryAfterSeconds: 5,
};

export type CapTable = Readonly<{
  /**
   * Take a place for `client`, or throw CONVERGE_ERR_CLIENT_OVER_CAP / CONVERGE_ERR_SERVER_AT_CAP.
   * Returns the release, which may be called more than once.
   */
  acquire: (kind: CapKind, client: string) => () => void;
  open: (kind: CapKind) => number;
  retryAfterSeconds: number;
}>;

export function createCapTable(caps: ConnectionCaps, metrics?: Metrics): CapTable {
  const total: Record<CapKind, number> = { stream: 0, await: 0 };
  const byClient: Record<CapKind, Map<string, number>> = { stream: new Map(), await: new Map() };
  const limits: Record<CapKind, { all: number; each: number; what: string }> = {
    stream: { all: caps.streams, each: caps.streamsPerClient, what: 'event streams' },
    await: { all: caps.awaits, each: caps.awaitsPerClient, what: 'awaits' },
  };
  const refuse = (kind: CapKind, reason: 'client_cap' | 'server_cap'): void => metrics?.httpRefused.inc({ kind, reason });
  // Both series from the start, so a dashboard shows 0 rather than nothing.
  for (const kind of ['stream', 'await'] as const) metrics?.httpOpen.set({ kind }, 0);

  return {
    retryAfterSeconds: caps.retryAfterSeconds,
    open: (kind) => total[kind],
    acquire(kind, client) {
      const l = limits[kind];
      const mine = byClient[kind].get(client) ?? 0;
      // The client's own cap first: a client at its share is told so (429) even when the engine is full too.
      if (mine >= l.each) {
        refuse(kind, 'client_cap');
        throw new ConvergeError('CONVERGE_ERR_CLIENT_OVER_CAP', `${client} already holds ${mine} ${l.what}, the most one client may`, {
          details: { kind, limit: l.each, retryAfterSeconds: caps.retryAfterSeconds },
        });
      }
      if (total[kind] >= l.all) {
        refuse(kind, 'server_cap');
        throw new ConvergeError(
          'CONVERGE_ERR_SERVER_AT_CAP',
          `the engine already holds ${total[kind]} ${l.what}, the most it serves at once`,
          {
            details: { kind, limit: l.all, retryAfterSeconds: caps.retryAfterSeconds },
          },
        );
      }
      byClient[kind].set(client, mine + 1);
      total[kind]++;
      metrics?.httpOpen.set({ kind }, total[kind]);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const n = (byClient[kind].get(client) ?? 1) - 1;
        if (n === 0) byClient[kind].delete(client);
        else byClient[kind].set(client, n);
        total[kind]--;
        metrics?.httpOpen.set({ kind }, total[kind]);
      };
    },
  };
}

/**
 * The onRequest step for a capped route (after the token is checked, before the body): take a
 * place, give it back when the response closes (answered, ended, or the client went away). A
 * refusal carries Retry-After and closes its connection, so a refused client holds no socket.
 */
export function holdPlace(table: CapTable, kind: CapKind, client: string, reply: FastifyReply): void {
  let release: () => void;
  try {
    release = table.acquire(kind, client);
  } catch (err) {
    reply.header('retry-after', String(table.retryAfterSeconds));
    reply.header('connection', 'close');
    throw err;
  }
  reply.raw.once('close', release);
}

/** Who a request counts against: its token, or with reads open its address. */
export const clientOf = (tokenId: string | null, address: string): string => (tokenId === null ? `address ${address}` : `token ${tokenId}`);
