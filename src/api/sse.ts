import type { FastifyReply } from 'fastify';
import type { NodeState, NodeView } from '../../projections/index.ts';
import type { ReadModel } from '../readModel/readModel.ts';
import { headersFor } from './responseHeaders.ts';

// GET /v1/events (DESIGN §7): one server-sent event per node state change, `id:` = the store
// position of the event that caused it. Resuming with Last-Event-ID sends the *current* state of
// every node that changed after that position (oldest first), then follows live: a client that
// mirrors node states ends up exactly right without us keeping a change log. Both parts run in
// one synchronous turn, so no fold can slip between them.

/** A client this far behind is cut off; it reconnects with Last-Event-ID and loses nothing. */
const maxBufferedBytes = 4 * 1024 * 1024;

export type StreamOptions = Readonly<{
  readModel: ReadModel;
  reply: FastifyReply;
  view: (s: NodeState) => NodeView;
  node: string | null;
  after: bigint | null;
  heartbeatMs: number;
  /** Open streams, so closing the app can end them (a client holds its stream open forever). */
  open: Set<() => void>;
}>;

export function streamChanges({ readModel, reply, view, node, after, heartbeatMs, open }: StreamOptions): void {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    ...headersFor('stream'),
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.write('retry: 2000\n: connected\n\n');
  let closed = false;

  const write = (st: NodeState, position: bigint): void => {
    if (closed) return;
    res.write(`id: ${position}\nevent: node\ndata: ${JSON.stringify(view(st))}\n\n`);
    if (res.writableLength > maxBufferedBytes) close();
  };

  const unsubscribe = readModel.onChange((c) => {
    if (node === null || c.node === node) write(c.state, c.position);
  });

  if (after !== null) {
    const changed: NodeState[] = [];
    for (const st of readModel.nodes()) if (st.position > after && (node === null || st.node === node)) changed.push(st);
    changed.sort((a, b) => (a.position < b.position ? -1 : 1));
    for (const st of changed) write(st, st.position);
  }

  const heartbeat = setInterval(() => {
    if (!closed) res.write(': ping\n\n');
  }, heartbeatMs);
  heartbeat.unref();

  function close(): void {
    if (closed) return;
    closed = true;
    open.delete(close);
    clearInterval(heartbeat);
    unsubscribe();
    res.end();
  }
  open.add(close);
  res.once('close', close);
}
