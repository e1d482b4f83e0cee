import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, SpanKind as OtelKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Link, Span as OtelSpan, SpanContext } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { noopSpan } from './tracer.ts';
import type { Span, SpanKind, SpanOptions, Tracing } from './tracer.ts';
import { tracesEndpoint } from './endpoint.ts';

// The real tracing, loaded only when tracing is on (index.ts imports this module dynamically).
// Spans go through a batch processor to an OTLP/HTTP exporter, which posts JSON
// (`application/json`) to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT +
// `/v1/traces`, or the collector's default http://localhost:4318/v1/traces.
// The parent of a span is explicit, or the span `within` runs (AsyncLocalStorage), or a span
// context remembered under a key: the declaration's digest ties a report's trace to its send's.

const kinds: Record<SpanKind, OtelKind> = {
  internal: OtelKind.INTERNAL,
  server: OtelKind.SERVER,
  client: OtelKind.CLIENT,
  producer: OtelKind.PRODUCER,
  consumer: OtelKind.CONSUMER,
};

export type OtelTracingOptions = Readonly<{
  env?: NodeJS.ProcessEnv;
  remember?: number;
  /** Instead of OTLP/HTTP (tests). */
  exporter?: SpanExporter;
}>;

const traceparentOf = (c: SpanContext): string => `00-${c.traceId}-${c.spanId}-${(c.traceFlags & 0xff).toString(16).padStart(2, '0')}`;

class Wrapped implements Span {
  readonly inner: OtelSpan;
  readonly owner: OtelTracing;
  constructor(inner: OtelSpan, owner: OtelTracing) {
    this.inner = inner;
    this.owner = owner;
  }
  setAttribute(key: string, value: string | number | boolean): void {
    this.inner.setAttribute(key, value);
  }
  remember(key: string): void {
    this.owner.keep(key, this.inner.spanContext());
  }
  end(error?: unknown): void {
    if (error !== undefined) {
      this.inner.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    }
    this.inner.end();
  }
  traceparent(): string {
    return traceparentOf(this.inner.spanContext());
  }
}

class OtelTracing implements Tracing {
  readonly enabled = true;
  private readonly provider: BasicTracerProvider;
  private readonly otel;
  private readonly active = new AsyncLocalStorage<Wrapped>();
  private readonly remembered = new Map<string, SpanContext>();
  private readonly most: number;

  constructor(options: OtelTracingOptions) {
    const env = options.env ?? process.env;
    const exporter = options.exporter ?? new OTLPTraceExporter({ url: tracesEndpoint(env) });
    const service = env['OTEL_SERVICE_NAME']?.trim() || 'converge';
    this.provider = new BasicTracerProvider({
      resource: defaultResource().merge(resourceFromAttributes({ 'service.name': service })),
      spanProcessors: [new BatchSpanProcessor(exporter)],
    });
    this.otel = this.provider.getTracer('converge');
    this.most = options.remember ?? 50_000;
  }

  keep(key: string, c: SpanContext): void {
    // Insertion order is age: re-keeping a key moves it to the young end.
    this.remembered.delete(key);
    this.remembered.set(key, c);
    if (this.remembered.size > this.most) this.remembered.delete(this.remembered.keys().next().value!);
  }

  knows(key: string): boolean {
    return this.remembered.has(key);
  }

  start(name: string, options: SpanOptions = {}): Span {
    let parent: SpanContext | undefined;
    if (options.parent === undefined) parent = this.active.getStore()?.inner.spanContext();
    else if (typeof options.parent === 'string') parent = this.remembered.get(options.parent);
    else if (options.parent instanceof Wrapped) parent = options.parent.inner.spanContext();
    if (parent === undefined && options.childOnly === true) return noopSpan;
    const links: Link[] = [];
    for (const k of options.links ?? []) {
      const c = this.remembered.get(k);
      if (c !== undefined && c.spanId !== parent?.spanId) links.push({ context: c });
    }
    const ctx = parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent);
    const inner = this.otel.startSpan(
      name,
      {
        kind: kinds[options.kind ?? 'internal'],
        ...(options.attributes === undefined ? {} : { attributes: options.attributes }),
        ...(links.length === 0 ? {} : { links }),
        ...(options.startTime === undefined ? {} : { startTime: options.startTime }),
      },
      ctx,
    );
    return new Wrapped(inner, this);
  }

  within<T>(span: Span, fn: () => T): T {
    return span instanceof Wrapped ? this.active.run(span, fn) : fn();
  }

  async shutdown(): Promise<void> {
    await this.provider.forceFlush();
    await this.provider.shutdown();
  }
}

export const createOtelTracing = (options: OtelTracingOptions = {}): Tracing => new OtelTracing(options);
