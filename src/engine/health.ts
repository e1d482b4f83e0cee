// How a part of the write path (ingest appending, the relay publishing) is doing, in one shape:
// /healthz, /readyz and the metrics read it the same way for both (docs/design.md#6-operating-it).

export type ComponentHealth = Readonly<{
  healthy: boolean;
  /** When it last succeeded: ingest appended, the relay had a batch confirmed (null: not yet). */
  lastSuccessAt: Date | null;
  /** When it started failing (null while healthy). */
  failingSince: Date | null;
  /** The last failure, `CODE: message` for ingest (null while healthy). */
  error: string | null;
  /** Ingest only: deliveries received and not yet acked or refused, waiting for or in an append. */
  pending?: number;
}>;
