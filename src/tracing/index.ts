import { setTracing, tracer } from './tracer.ts';
import type { Tracing } from './tracer.ts';

export { attr, digestKey, eventKey, noopSpan, noopTracing, setTracing, tracer } from './tracer.ts';
export { tracesEndpoint } from './endpoint.ts';
export type { Attributes, Span, SpanKind, SpanOptions, Tracing } from './tracer.ts';

export type StartTracingOptions = Readonly<{
  /** Where OTEL_EXPORTER_OTLP_*ENDPOINT, OTEL_EXPORTER_OTLP_*HEADERS and OTEL_SERVICE_NAME are read. */
  env?: NodeJS.ProcessEnv;
  /** Spans remembered for links (digests, event ids), oldest forgotten first. */
  remember?: number;
}>;

/**
 * Load the OpenTelemetry SDK (only now: off, none of it is imported) and install a tracing that
 * exports over OTLP/HTTP JSON. Returns it; `stopTracing` flushes it and puts the no-op back.
 */
export async function startTracing(options: StartTracingOptions = {}): Promise<Tracing> {
  const { createOtelTracing } = await import('./otel.ts');
  const t = createOtelTracing(options);
  setTracing(t);
  return t;
}

/**
 * Flush and stop the installed tracing, leaving the no-op in its place. Resolves with why the
 * last spans could not be exported (a collector down), or null: a trace lost is never a reason
 * for the engine's stop to fail.
 */
export async function stopTracing(): Promise<string | null> {
  const t = tracer();
  if (!t.enabled) return null;
  setTracing((await import('./tracer.ts')).noopTracing);
  try {
    await t.shutdown();
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
