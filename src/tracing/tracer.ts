// The engine's traces as the hot paths see them: a small interface whose default does nothing.
// Off (the default), `tracer()` is `noopTracing`, no OpenTelemetry module is loaded, and a traced
// path costs a call that returns a shared no-op span. `startTracing` (index.ts) loads the SDK
// on demand and installs the real one. docs/operations.md "Tracing" lists the spans.

export type AttributeValue = string | number | boolean;
export type Attributes = Readonly<Record<string, AttributeValue>>;
export type SpanKind = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

export interface Span {
  setAttribute(key: string, value: AttributeValue): void;
  /**
   * Keep this span's context under a key (`digest:<sha>`, `event:<id>`): a later span — in
   * another trace, started by code that has only the key — becomes its child or links to it.
   */
  remember(key: string): void;
  /** End the span; an error marks it failed. */
  end(error?: unknown): void;
  /** The W3C `traceparent` of this span (null when tracing is off). */
  traceparent(): string | null;
}

export type SpanOptions = Readonly<{
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent: a span, or a remembered key (no parent if forgotten). Default: the span `within` runs. */
  parent?: Span | string;
  /** Links to remembered keys (those not remembered are left out). */
  links?: readonly string[];
  /** Made only as the child of a span: with no parent, no span (an append no request asked for). */
  childOnly?: boolean;
  /** When the span began, in ms since the epoch (default: now). */
  startTime?: number;
}>;

export interface Tracing {
  readonly enabled: boolean;
  start(name: string, options?: SpanOptions): Span;
  /** Run `fn` with `span` as the default parent of the spans started inside it (across awaits). */
  within<T>(span: Span, fn: () => T): T;
  /** Whether a key is remembered (its span context still held). */
  knows(key: string): boolean;
  /** Export what is buffered and stop. */
  shutdown(): Promise<void>;
}

export const noopSpan: Span = Object.freeze({
  setAttribute: () => {},
  remember: () => {},
  end: () => {},
  traceparent: () => null,
});

export const noopTracing: Tracing = Object.freeze({
  enabled: false,
  start: () => noopSpan,
  within: <T>(_span: Span, fn: () => T): T => fn(),
  knows: () => false,
  shutdown: async () => {},
});

let current: Tracing = noopTracing;

/** The tracing in effect: `noopTracing` unless `setTracing` installed another. */
export const tracer = (): Tracing => current;

/** Install a tracing (the real one at start, `noopTracing` again at stop); returns the one it replaced. */
export function setTracing(t: Tracing): Tracing {
  const was = current;
  current = t;
  return was;
}

/** Span attribute names, shared by the send's trace and the report's. */
export const attr = {
  digest: 'converge.digest',
  node: 'converge.node',
  serial: 'converge.serial',
  position: 'converge.position',
  eventType: 'converge.event.type',
  batch: 'converge.batch.size',
} as const;

/** The remembered key of a declaration: the send's trace, the relay's publish and the report naming it meet on it. */
export const digestKey = (digest: string): string => `digest:${digest}`;
/** The remembered key of an event appended by ingest: its fold and the waits it wakes find the report's trace by it. */
export const eventKey = (id: string): string => `event:${id}`;
