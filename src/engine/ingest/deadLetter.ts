import type { Logger } from 'pino';
import { toConvergeError } from '../../core/errors.ts';
import type { Metrics } from '../../metrics.ts';
import { retry } from '../../retry.ts';
import type { Delivery, IngestSource } from '../../transport/port.ts';
import type { Backoff, IngestCounts } from './options.ts';

// The two ways a delivery ingest will not store goes to mesh.dead. A refused one (a body that does
// not parse, a sender that is not the node, an event the store calls poison) is published there
// as a copy carrying its error code and reason, and acked only once the broker confirmed that
// copy. One over its node's budget is shed before it is parsed, through the queue's own
// dead-lettering (nack): publishing a coded copy of each cost more than the flood did to send,
// so the backlog kept growing (bench/fairness).

export type DeadLetters = Readonly<{
  /** Copy `d` to mesh.dead with the code and reason of `err`, then ack it; retried while `d` can still be acked. */
  refuse: (d: Delivery, err: unknown) => void;
  /** Hand `d` of `node` back to the broker, over its budget, for its queue to dead-letter; counted, and logged per 5 s. */
  shed: (d: Delivery, node: string) => void;
  /** Resolves once every copy in flight now is confirmed or given up. */
  settled: () => Promise<void>;
}>;

export type DeadLetterOptions = Readonly<{
  source: IngestSource;
  logger: Logger;
  metrics: Metrics | undefined;
  now: () => Date;
  backoff: Backoff;
  /** Aborted at stop: a copy still waiting to be published is given up (the broker redelivers the original). */
  signal: AbortSignal;
  counts: IngestCounts;
}>;

export function createDeadLetters(options: DeadLetterOptions): DeadLetters {
  const { source, logger, metrics, now, backoff, signal, counts } = options;
  const inFlight = new Set<Promise<void>>();
  /** Messages shed per node since the last warning: a flood logs a line per 5 s, not one per message. */
  const shedSince = new Map<string, number>();
  let shedLogAt = 0;

  function refuse(d: Delivery, err: unknown): void {
    const e = toConvergeError(err);
    metrics?.ingestRejected.inc({ reason: e.code });
    logger.warn(
      { code: e.code, kind: d.kind, messageId: d.messageId, userId: d.userId, reason: e.message },
      'refusing message to mesh.dead',
    );
    // Retry while the delivery can still be acked; once its channel is gone the broker will
    // redeliver it and it is refused again then.
    const p = (async () => {
      if (!source.isLive(d)) return;
      const r = await retry(() => source.deadLetter(d, e.code, e.message), {
        ...backoff,
        signal,
        onError: (err2) => {
          logger.warn({ err: (err2 as Error).message, messageId: d.messageId }, 'dead-letter publish failed; retrying');
          return source.isLive(d);
        },
      });
      if (r.ok) counts.deadLettered++;
    })();
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }

  function logShed(node: string): void {
    shedSince.set(node, (shedSince.get(node) ?? 0) + 1);
    const t = now().getTime();
    if (t - shedLogAt < 5_000) return;
    shedLogAt = t;
    logger.warn(
      { code: 'CONVERGE_ERR_RATE_LIMITED', nodes: Object.fromEntries(shedSince) },
      'messages over their node budget refused to mesh.dead (x-death reason rejected)',
    );
    shedSince.clear();
  }

  function shed(d: Delivery, node: string): void {
    counts.rateLimited++;
    metrics?.ingestRejected.inc({ reason: 'CONVERGE_ERR_RATE_LIMITED' });
    logShed(node);
    source.reject(d, 'CONVERGE_ERR_RATE_LIMITED');
  }

  return {
    refuse,
    shed,
    settled: async () => {
      await Promise.all([...inFlight]);
    },
  };
}
