import { request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';

// Clients that hold connections open, for the connection caps: an event
// stream or a long poll that stays open until the test lets go, and a bare socket that says
// nothing. Built on node:http, not fetch, so a client can pick its source address
// (127.0.0.2 is another client to a server on 127.0.0.1) and each holds its own socket.

export type HeldAnswer = Readonly<{
  status: number;
  headers: IncomingMessage['headers'];
  /** The body of a refusal (read whole); '' for an answer still streaming. */
  body: string;
  /** Resolves when the server ended the answer or closed the connection. */
  ended: Promise<void>;
  /** Let go: close the connection from this side. */
  close: () => void;
}>;

/**
 * GET `path` and resolve once the status is known. A 200 stays open (the body is drained and
 * dropped) until `close`; any other status is read whole into `body`.
 */
export function holdGet(
  base: string,
  path: string,
  options: Readonly<{ headers?: Record<string, string>; localAddress?: string }> = {},
): Promise<HeldAnswer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'GET',
      headers: options.headers ?? {},
      // One socket per held answer: the default agent would queue a second stream behind the first.
      agent: false,
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const ended = new Promise<void>((done) => {
        res.once('end', done);
        res.once('close', done);
      });
      const close = (): void => {
        req.destroy();
      };
      if (res.statusCode === 200) {
        // Wait for the first bytes, so the server holds the stream (or poll) when this resolves.
        res.once('data', () => {
          res.resume();
          resolve({ status: 200, headers: res.headers, body: '', ended, close });
        });
        res.once('end', () => resolve({ status: 200, headers: res.headers, body: '', ended, close }));
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.once('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), ended, close }),
      );
    });
    req.end();
  });
}

/** A socket that connects and sends nothing; `closed` resolves when the server closes it. */
export async function silentSocket(base: string): Promise<Readonly<{ socket: Socket; closed: Promise<void> }>> {
  const url = new URL(base);
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  // Flowing, so the server's FIN is read: a paused socket never emits 'end', never closes its own
  // side, and sits in CLOSE-WAIT with `closed` unresolved (it hung a CI run for 15 minutes). What
  // the server sends (a 408) is dropped unless the caller listens for 'data' itself.
  socket.resume();
  const closed = new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
  await new Promise<void>((resolve) => {
    socket.once('connect', resolve);
    socket.once('error', () => resolve());
  });
  return { socket, closed };
}
