import type { NodeEvent } from '../../core/events/index.ts';
import type { NewEvent } from '../../store/port.ts';
import { attr, digestKey, eventKey, tracer } from '../../tracing/index.ts';
import type { Span } from '../../tracing/index.ts';
import type { Pending } from './committer.ts';

// A report's trace (docs/operations.md "Tracing"): `converge.report.ingest` from its parse to
// the moment its event is durable, with `converge.store.append` inside it, linked to the send's
// trace by the digest it declares. The span is remembered by the event's id, so the fold and the
// awaits and streams it wakes add their spans to the same trace. Only reports are traced: an
// alive names no declaration. Off, every call returns at its first test.

/** Spans open at once, at most: a batch the store refuses for good must not grow the map forever. */
const mostOpen = 100_000;

export type ReportTraces = Readonly<{
  /** A report parsed into its event. */
  parsed: (event: NewEvent<NodeEvent> | null) => void;
  /** A batch handed to the store. */
  appending: (batch: readonly Pending[]) => void;
  /** A batch durable (or refused and acked without its events). */
  appended: (batch: readonly Pending[]) => void;
}>;

export function createReportTraces(): ReportTraces {
  const open = new Map<string, { span: Span; appendAt: number | null }>();
  return {
    parsed(event) {
      const t = tracer();
      if (!t.enabled || event === null || event.type !== 'ReportReceived') return;
      const declared = event.data.declared;
      const span = t.start('converge.report.ingest', {
        kind: 'consumer',
        attributes: {
          [attr.node]: event.data.node,
          [attr.eventType]: event.type,
          ...(declared === null ? {} : { [attr.digest]: declared }),
        },
        ...(declared === null ? {} : { links: [digestKey(declared)] }),
      });
      span.remember(eventKey(event.id));
      open.set(event.id, { span, appendAt: null });
      if (open.size > mostOpen) {
        const [id, oldest] = open.entries().next().value!;
        oldest.span.end(new Error('not appended before the span limit'));
        open.delete(id);
      }
    },
    appending(batch) {
      if (open.size === 0) return;
      const at = Date.now();
      for (const p of batch) {
        const o = p.event === null ? undefined : open.get(p.event.id);
        if (o !== undefined && o.appendAt === null) o.appendAt = at;
      }
    },
    appended(batch) {
      if (open.size === 0) return;
      const t = tracer();
      for (const p of batch) {
        const o = p.event === null ? undefined : open.get(p.event.id);
        if (o === undefined) continue;
        open.delete(p.event!.id);
        t.start('converge.store.append', { parent: o.span, startTime: o.appendAt ?? Date.now() }).end();
        o.span.end();
      }
    },
  };
}
