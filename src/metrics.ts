import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

// docs/design.md §7 metrics. One registry per engine instance (not prom-client's global one) so tests
// and several engines in one process never share counters.

export type Metrics = Readonly<{
  registry: Registry;
  eventsAppended: Counter<'type'>;
  ingestRejected: Counter<'reason'>;
  projectionLag: Gauge;
  projectionFailed: Gauge;
  snapshotRejected: Counter<'reason'>;
  nodes: Gauge<'status' | 'liveness'>;
  convergenceSeconds: Histogram;
  relayPublished: Counter;
  relayIssued: Counter;
  ingestHealthy: Gauge;
  ingestPending: Gauge;
  ingestLastAppendAge: Gauge;
  ingestRedelivered: Counter;
  relayHealthy: Gauge;
  httpOpen: Gauge<'kind'>;
  httpRefused: Counter<'kind' | 'reason'>;
}>;

export function createMetrics(options: { processMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  return {
    registry,
    eventsAppended: new Counter({
      name: 'converge_events_appended_total',
      help: 'Events appended to the store, by type',
      labelNames: ['type'],
      registers: [registry],
    }),
    ingestRejected: new Counter({
      name: 'converge_ingest_rejected_total',
      help: 'Messages dead-lettered by ingest, by error code',
      labelNames: ['reason'],
      registers: [registry],
    }),
    projectionLag: new Gauge({
      name: 'converge_projection_lag_events',
      help: 'Events in the store not yet folded into the read model',
      registers: [registry],
    }),
    projectionFailed: new Gauge({
      name: 'converge_projection_failed',
      help: '1 while projections are stopped on an event whose fold failed (the log names it); nothing after it is folded',
      registers: [registry],
    }),
    // A snapshot that fails a check is not restored; the runner folds from zero.
    snapshotRejected: new Counter({
      name: 'converge_snapshot_rejected_total',
      help: 'Read-model snapshots not used at start, by reason (format, fold-version, checksum, schema, truncated, other-store, inconsistent, cross-check, unreadable); the engine folded from zero',
      labelNames: ['reason'],
      registers: [registry],
    }),
    nodes: new Gauge({
      name: 'converge_nodes',
      help: 'Nodes by status and liveness',
      labelNames: ['status', 'liveness'],
      registers: [registry],
    }),
    convergenceSeconds: new Histogram({
      name: 'converge_convergence_seconds',
      help: 'Send of a declaration to the first report naming its digest',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
      registers: [registry],
    }),
    relayPublished: new Counter({
      name: 'converge_relay_published_total',
      help: 'Declarations confirmed by the broker',
      registers: [registry],
    }),
    relayIssued: new Counter({
      name: 'converge_relay_issued_total',
      help: 'Declarations written to the broker, counted as written (a confirm may come much later)',
      registers: [registry],
    }),
    // With SQLite full, nothing here said ingest was failing.
    ingestHealthy: new Gauge({
      name: 'converge_ingest_healthy',
      help: '1 while ingest appends to the store; 0 while appends fail and deliveries are held unacked and retried',
      registers: [registry],
    }),
    ingestPending: new Gauge({
      name: 'converge_ingest_pending',
      help: 'Deliveries received and not yet acked or refused (waiting for, or in, a store append)',
      registers: [registry],
    }),
    ingestLastAppendAge: new Gauge({
      name: 'converge_ingest_last_append_age_seconds',
      help: 'Seconds since ingest last appended to the store (since the engine started, before any append)',
      registers: [registry],
    }),
    ingestRedelivered: new Counter({
      name: 'converge_ingest_redelivered_total',
      help: 'Deliveries the broker flagged as redelivered (after a connection, channel or engine loss)',
      registers: [registry],
    }),
    relayHealthy: new Gauge({
      name: 'converge_relay_healthy',
      help: '1 while the relay publishes declarations; 0 while a batch fails and is retried from the checkpoint',
      registers: [registry],
    }),
    // 20,000 streams of one token reached the process's descriptor limit.
    httpOpen: new Gauge({
      name: 'converge_http_open',
      help: 'Requests the API holds open, by kind: stream (GET /v1/events), await (GET /v1/nodes/:node/await)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    httpRefused: new Counter({
      name: 'converge_http_refused_total',
      help: 'Requests and connections the API refused for a cap, by kind (stream, await, connection) and reason (client_cap: 429; server_cap: 503, or a socket dropped past --max-connections)',
      labelNames: ['kind', 'reason'],
      registers: [registry],
    }),
  };
}
