import type { FastifyInstance } from 'fastify';
import type { ServerOptions } from 'node:http';
import type { Metrics } from '../metrics.ts';

// At the socket: the connections the main listener keeps, and how long one may
// sit idle. With the caps on streams and awaits (connectionCaps.ts) below `maxConnections`, the
// sockets between them are a reserve for short requests and the probes; past `maxConnections`
// node closes a new socket at once instead of letting the process run into its descriptor limit,
// where every accept fails (the admin listener's included).

export type ListenerLimits = Readonly<{
  /** Sockets the listener holds at once; a new one past it is closed at once. */
  maxConnections: number;
  /** A kept-alive socket idle this long after an answer is closed. */
  idleMs: number;
  /**
   * A request's headers and body must arrive within this, and a socket silent this long (one that
   * never sends a request, a handler that writes nothing) is closed; an event stream or an await
   * is exempt once it holds its place (it has its own lifetime, timeout and heartbeat).
   */
  requestTimeoutMs: number;
}>;

export const defaultListenerLimits: ListenerLimits = {
  maxConnections: 4_000,
  idleMs: 10_000,
  requestTimeoutMs: 30_000,
};

export type ListenerOptions = Readonly<{
  keepAliveTimeout?: number;
  requestTimeout?: number;
  connectionTimeout?: number;
  http?: ServerOptions;
}>;

/** The options of Fastify() that set the node server's timeouts. */
export function listenerOptions(limits: ListenerLimits): ListenerOptions {
  return {
    keepAliveTimeout: limits.idleMs,
    requestTimeout: limits.requestTimeoutMs,
    // Node's request and headers timeouts start at a request's first byte: a socket that never
    // sends one is only closed by the inactivity timeout.
    connectionTimeout: limits.requestTimeoutMs,
    http: {
      // Fastify builds node's server from these alone once `http` is given: without the request
      // timeout here, node's own (300 s) applies, and it refuses a longer headers timeout.
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.requestTimeoutMs,
      // How often node looks for sockets past the request timeout (its default, 30 s, would let
      // a silent socket live up to that much longer than the timeout says).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.requestTimeoutMs / 4))),
    },
  };
}

/** Cap the sockets of `app`'s server, counting each one dropped. */
export function capConnections(app: FastifyInstance, limits: ListenerLimits, metrics?: Metrics): void {
  app.server.maxConnections = limits.maxConnections;
  app.server.on('drop', () => metrics?.httpRefused.inc({ kind: 'connection', reason: 'server_cap' }));
}

/**
 * Once `app` is closing, every answer says `Connection: close`, so its socket ends with it: node
 * closes the sockets idle when the close begins, and one whose answer was in flight then would
 * otherwise be kept alive for the idle timeout, holding the close (and `serve`'s stop) that long.
 */
export function closeSocketsWhenClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_req, reply, payload) => {
    if (closing) void reply.header('connection', 'close');
    return payload;
  });
}

/**
 * Close `app`, giving the requests it holds `graceMs` to be answered; past it, every socket is cut
 * (a handler that does not end, an answer the client does not read, a socket that never sent a
 * request, which node no longer times out once the server closes) and the close goes on.
 */
export async function closeWithin(app: FastifyInstance, graceMs: number): Promise<void> {
  const cut = setTimeout(() => app.server.closeAllConnections(), graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(cut);
  }
}
