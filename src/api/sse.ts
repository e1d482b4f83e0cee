import type { FastifyReply } from 'fastify';
import type { NodeState, NodeView } from '../../projections/index.ts';
import type { ReadModel } from '../readModel/readModel.ts';
import type { RolloutSummary, RolloutView } from '../readModel/rollouts.ts';
import { headersFor } from './responseHeaders.ts';
import { attr, eventKey, tracer } from '../tracing/index.ts';

// GET /v1/events (docs/design.md §7): one server-sent event per node state change, `id:` = the store
// position of the event that caused it; and one `rollout` event per change of a
// rollout: one of its events, a change of how one of its nodes stands (so about two per
// target: sent, then done or failed), or a report from a node still pending, carrying the rollout's summary. Resuming with Last-Event-ID sends the *current* state of
// every node that changed after that position (oldest first), then follows live: a client that
// mirrors node states ends up exactly right without us keeping a change log. Both parts run in
// one synchronous turn, so no fold can slip between them.

/** A client this far behind is cut off; it reconnects with Last-Event-ID and loses nothing. */
const maxBufferedBytes = 4 * 1024 * 1024;

/**
 * A stream ends after this long, saying so in a comment; the client resumes
 * with Last-Event-ID at once (EventSource does by itself, after `retry`). Its place under the
 * caps is counted again then, and a stream nobody reads any more does not outlive its client's
 * interest by more than this.
 */
export const defaultStreamMaxMs = 60 * 60 * 1000;

export type StreamOptions = Readonly<{
  readModel: ReadModel;
  reply: FastifyReply;
  view: (s: NodeState) => NodeView;
  node: string | null;
  /** Rollout changes come from here; with `rollout`, only that rollout's (and no node's unless `node` is given too). */
  rollouts?: RolloutView;
  rollout?: string | null;
  now?: () => number;
  after: bigint | null;
  heartbeatMs: number;
  /** The stream's lifetime (defaultStreamMaxMs). */
  maxMs: number;
  /** Open streams, so closing the app can end them (a client holds its stream open forever). */
  open: Set<() => void>;
}>;

export function streamChanges({
  readModel,
  reply,
  view,
  node,
  rollouts,
  rollout = null,
  now = Date.now,
  after,
  heartbeatMs,
  maxMs,
  open,
}: StreamOptions): void {
  // Which kinds this stream carries: a filter on one kind leaves out the other, unless it is filtered too.
  const nodes = node !== null || rollout === null;
  const rolloutsToo = rollouts !== undefined && (rollout !== null || node === null);
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

  const writeRollout = (summary: RolloutSummary | undefined, position: bigint): void => {
    if (closed || summary === undefined) return;
    res.write(`id: ${position}\nevent: rollout\ndata: ${JSON.stringify(summary)}\n\n`);
    if (res.writableLength > maxBufferedBytes) close();
  };

  let unsubscribeNodes = (): void => {};
  let unsubscribeRollouts = (): void => {};
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let lifetime: ReturnType<typeof setTimeout> | undefined;
  function close(): void {
    if (closed) return;
    closed = true;
    open.delete(close);
    clearInterval(heartbeat);
    clearTimeout(lifetime);
    unsubscribeNodes();
    unsubscribeRollouts();
    res.end();
  }
  // Registered before anything can throw: a resume that failed after the headers kept its
  // listeners for good, and every later change was written to streams nobody held.
  open.add(close);
  res.once('close', close);
  try {
    if (nodes)
      unsubscribeNodes = readModel.onChange((c) => {
        if (node !== null && c.node !== node) return;
        // A span of the report's trace when ingest traced the event this change comes from.
        const t = tracer();
        const span = t.enabled
          ? t.start('converge.sse.send', { parent: eventKey(c.event.id), childOnly: true, attributes: { [attr.node]: c.node } })
          : null;
        write(c.state, c.position);
        span?.end();
      });
    if (rolloutsToo && rollouts !== undefined)
      unsubscribeRollouts = rollouts.onChange((c) => {
        if (rollout === null || c.rollout === rollout) writeRollout(rollouts.summary(c.rollout, now()), c.position);
      });

    if (after !== null) {
      // The current state of everything that changed after `after`, oldest change first.
      const changed: { position: bigint; write: () => void }[] = [];
      if (nodes)
        for (const st of readModel.nodes())
          if (st.position > after && (node === null || st.node === node))
            changed.push({ position: st.position, write: () => write(st, st.position) });
      if (rolloutsToo && rollouts !== undefined)
        for (const r of rollouts.list()) {
          const summary = rollouts.summary(r.id, now());
          const at = summary === undefined ? 0n : BigInt(summary.position);
          if (at > after && (rollout === null || r.id === rollout)) changed.push({ position: at, write: () => writeRollout(summary, at) });
        }
      changed.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
      for (const c of changed) c.write();
    }

    heartbeat = setInterval(() => {
      if (!closed) res.write(': ping\n\n');
    }, heartbeatMs);
    heartbeat.unref();
    lifetime = setTimeout(() => {
      if (!closed) res.write(': max lifetime reached; resume with Last-Event-ID\n\n');
      close();
    }, maxMs);
    lifetime.unref();
  } catch (err) {
    // The headers are sent: the stream can only end, saying so in a comment.
    reply.log.error({ err }, 'event stream failed; ended');
    if (!closed && !res.writableEnded) res.write(': failed; resume with Last-Event-ID\n\n');
    close();
  }
}
