import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import amqp from 'amqplib';
import type { GetMessage } from 'amqplib';
import { loadConfig } from '../../src/app/config.ts';
import { createServer } from '../../src/app/server.ts';
import { generateSigningKey } from '../../src/core/declaration/index.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import { tracer } from '../../src/tracing/index.ts';
import { connectAmqp } from '../../src/transport/amqpConnection.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import type { AmqpTransport } from '../../src/transport/amqpTransport.ts';
import { nodeQueueOf } from '../../src/transport/brokerNames.ts';
import { createBrokerLab, describeOnBroker, uniqueTag } from '../support/broker.ts';
import type { BrokerLab } from '../support/broker.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { startOtlpReceiver } from './otlpReceiver.ts';
import type { OtlpReceiver, ReceivedSpan } from './otlpReceiver.ts';

// `serve --tracing on` over a real RabbitMQ, exporting to an OTLP/HTTP receiver of the test's own:
// a POST /v1/declarations and the node's report give the send's spans and the report's, both
// carrying the digest, the report's linked to the send's; the declaration the relay published
// carries the `traceparent` of its publish span in its AMQP headers, its body untouched.

describeOnBroker('tracing over RabbitMQ', () => {
  let lab: BrokerLab;
  let transport: AmqpTransport;
  let otlp: OtlpReceiver;
  before(async () => {
    lab = await createBrokerLab('converge-int-tracing');
    transport = await createAmqpTransport({ url: lab.engineUrl, logger, heartbeatSeconds: 5 });
    otlp = await startOtlpReceiver();
  });
  after(async () => {
    await transport?.close();
    await lab?.remove();
    await otlp?.close();
  });

  test(
    'a declaration POST and its report: spans with the digest, linked, and traceparent on the message',
    { timeout: 120_000 },
    async () => {
      const node = `${uniqueTag()}-tr`;
      process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = otlp.endpoint;
      process.env['OTEL_SERVICE_NAME'] = 'converge-under-test';
      const config = loadConfig(
        { flags: {}, env: {} },
        { store: 'memory:', port: '0', tracing: 'on', apiTokens: 'sender-token-1:read,send' },
      );
      const server = createServer({
        config,
        logger,
        store: createMemoryEventStore(),
        key: generateSigningKey(),
        transport: { ingestSource: transport.ingestSource(), publisher: transport.declarationPublisher() },
      });
      await server.start();
      const nodeUrl = await lab.enroll(node);
      const conn = await amqp.connect(nodeUrl);
      const linkConn = await connectAmqp({ url: nodeUrl, logger });
      const link = createAmqpNodeLink(linkConn, { node, logger });
      try {
        assert.equal(tracer().enabled, true, 'serve --tracing on installed the SDK');
        const res = await server.app.inject({
          method: 'POST',
          url: '/v1/declarations',
          headers: { authorization: 'Bearer sender-token-1' },
          payload: [{ node, resources: [{ id: 'web', image: 'web:1' }] }],
        });
        assert.equal(res.statusCode, 202, res.body);
        const digest = (res.json() as { results: { digest: string }[] }).results[0]!.digest;

        // The declaration as the node's inbox holds it: the traceparent header beside key-id.
        const ch = await conn.createChannel();
        const msg = await until(
          'the declaration in the inbox',
          async () => ((await ch.get(nodeQueueOf(node), { noAck: true })) || null) as GetMessage | null,
        );
        await ch.close();
        assert.equal(msg.properties.messageId, digest, 'message id still the digest');
        assert.equal(msg.fields.routingKey, node, 'routing key still the node');
        assert.equal(msg.fields.exchange, 'mesh.declarations');
        const traceparent = String(msg.properties.headers?.['traceparent'] ?? '');
        assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/, `traceparent header: ${traceparent}`);
        assert.ok(typeof msg.properties.headers?.['key-id'] === 'string', 'key-id header kept');
        assert.deepEqual(
          Object.keys(JSON.parse(msg.content.toString('utf8')) as object).sort(),
          ['declaration', 'signature'],
          'body is the Signed, unchanged',
        );

        // The node reports it; a client awaits that report.
        const waiting = server.app.inject({
          method: 'GET',
          url: `/v1/nodes/${node}/await?digest=${digest}&timeoutMs=60000`,
          headers: { authorization: 'Bearer sender-token-1' },
        });
        await link.publish(
          'report',
          encodeReport({ node, applied: ['web'], failed: {}, refused: '', carried: [], declared: digest }),
          'r-1',
        );
        assert.equal((await waiting).statusCode, 200);

        const named = (name: string, d = digest): ReceivedSpan | undefined =>
          otlp.spans.find((s) => s.name === name && (s.attributes['converge.digest'] === d || d === ''));
        await until(
          'every span exported',
          () =>
            ['POST /v1/declarations', 'converge.declaration', 'converge.relay.publish', 'converge.report.ingest'].every((n) => named(n)) &&
            otlp.spans.some((s) => s.name === 'converge.await.wake') &&
            otlp.spans.some((s) => s.name === 'converge.fold'),
        );
        const post = named('POST /v1/declarations')!;
        const decl = named('converge.declaration')!;
        const publish = named('converge.relay.publish')!;
        const report = named('converge.report.ingest')!;
        assert.equal(post.service, 'converge-under-test', 'OTEL_SERVICE_NAME names the service');
        const append = otlp.spans.find((s) => s.name === 'converge.store.append' && s.parentSpanId === post.spanId);
        assert.ok(append, 'the store append is a child of the POST');
        assert.equal(decl.parentSpanId, append.spanId, 'the declaration span is inside the append');
        assert.equal(publish.traceId, post.traceId, 'the relay publish is in the send trace');
        assert.equal(publish.parentSpanId, decl.spanId);
        assert.equal(traceparent, `00-${publish.traceId}-${publish.spanId}-01`, 'the header is the publish span');
        assert.notEqual(report.traceId, post.traceId, 'the report has a trace of its own');
        assert.deepEqual(report.links, [{ traceId: decl.traceId, spanId: decl.spanId }], 'linked to the send by the digest');
        const inReport = otlp.spans.filter((s) => s.traceId === report.traceId).map((s) => s.name);
        for (const n of ['converge.store.append', 'converge.fold', 'converge.await.wake'])
          assert.ok(inReport.includes(n), `${n} in the report's trace: ${inReport.join(', ')}`);
        assert.ok(
          [...otlp.contentTypes].every((c) => c.startsWith('application/json')),
          'OTLP/HTTP JSON',
        );
      } finally {
        await link.close();
        await linkConn.close();
        await conn.close();
        await server.stop();
      }
      assert.equal(tracer().enabled, false, 'stop puts the no-op back');
    },
  );
});
