import { createServer } from 'node:http';
import type { Server } from 'node:http';

// An OTLP/HTTP receiver for the tracing tests: node:http on 127.0.0.1:0 taking the exporter's
// JSON POSTs to /v1/traces and keeping every span, with its attributes flattened to strings.

export type ReceivedSpan = Readonly<{
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  attributes: Readonly<Record<string, string>>;
  links: readonly Readonly<{ traceId: string; spanId: string }>[];
  service: string;
}>;

export type OtlpReceiver = { endpoint: string; spans: ReceivedSpan[]; contentTypes: Set<string>; close: () => Promise<void> };

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };
const valueOf = (v: AnyValue): string => String(v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue ?? '');
const flatten = (kvs: readonly KeyValue[] | undefined): Record<string, string> =>
  Object.fromEntries((kvs ?? []).map((kv) => [kv.key, valueOf(kv.value)]));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const r: OtlpReceiver = {
    endpoint: '',
    spans: [],
    contentTypes: new Set(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.contentTypes.add(String(req.headers['content-type']));
      if (req.url !== '/v1/traces') return void res.writeHead(404).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: {
          resource: { attributes: KeyValue[] };
          scopeSpans: {
            spans: {
              name: string;
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              attributes?: KeyValue[];
              links?: { traceId: string; spanId: string }[];
            }[];
          }[];
        }[];
      };
      for (const rs of body.resourceSpans) {
        const service = flatten(rs.resource.attributes)['service.name'] ?? '';
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            r.spans.push({
              name: s.name,
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              attributes: flatten(s.attributes),
              links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              service,
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const a = server.address();
  if (a === null || typeof a === 'string') throw new Error('no address');
  r.endpoint = `http://127.0.0.1:${a.port}`;
  return r;
}
