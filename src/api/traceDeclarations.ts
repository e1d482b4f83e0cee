import { attr, tracer } from '../tracing/index.ts';

// The root of a send's trace (docs/operations.md "Tracing"): the POST's span, in which the store
// append and a span per declaration recorded (src/engine/sendBatch.ts) are children.

export async function traceDeclarations<T>(name: string, send: () => Promise<T>, digests: (r: T) => readonly string[]): Promise<T> {
  const t = tracer();
  if (!t.enabled) return send();
  const span = t.start(name, { kind: 'server', attributes: { 'http.request.method': 'POST' } });
  try {
    const r = await t.within(span, send);
    const all = digests(r);
    if (all.length === 1) span.setAttribute(attr.digest, all[0]!);
    span.setAttribute('converge.declarations', all.length);
    span.end();
    return r;
  } catch (err) {
    span.end(err);
    throw err;
  }
}
