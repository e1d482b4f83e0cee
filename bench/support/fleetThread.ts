import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { verifyDeclaration, verifyingKeyFromPem } from '../../src/core/declaration/index.ts';
import type { Delivery } from '../../src/transport/port.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createInProcessBroker } from '../../src/transport/inProcess.ts';
import { ownThreadId } from './remoteFleet.ts';
import type { FleetIn, FleetOut, FleetSettings } from './remoteFleet.ts';

// The simulated fleet of a bench, in a worker thread (started by remoteFleet.ts): its verifying,
// applying and reporting then take neither the engine's event loop nor count as its CPU. The nodes
// are src/simulation's, on an in-process broker of their own: a declaration posted in goes to its
// node's inbox as the relay would have put it, and what the nodes publish is posted back out in
// batches, one message a turn, for the engine's broker to deliver to ingest.

const settings = workerData as FleetSettings;
const port = parentPort!;
const logger = pino({ level: 'silent' });
const key = verifyingKeyFromPem(settings.publicKeyPem);
// Every `verifyEvery`-th declaration's signature is checked (1: all). One Ed25519 verify is about
// 0.1 ms of CPU: a fleet verifies on as many CPUs as it has nodes, this thread one at a time.
const verifyEvery = Math.max(1, Math.floor(settings.verifyEvery ?? 1));
let received = 0;
const verify = (bytes: Uint8Array, signature: Uint8Array, k: typeof key): boolean =>
  received++ % verifyEvery === 0 ? verifyDeclaration(bytes, signature, k) : signature.length === 64;
const broker = createInProcessBroker();
const publisher = broker.declarationPublisher();
const source = broker.ingestSource();

let out: Delivery[] = [];
let flushing = false;
const flush = (): void => {
  flushing = false;
  const batch = out;
  out = [];
  source.ack(batch);
  const msg: FleetOut = {
    kind: 'published',
    messages: batch.map((d) => ({ kind: d.kind, body: d.body, messageId: d.messageId, userId: d.userId })),
  };
  port.postMessage(msg);
};

let nodes: SimulatedNode[] = [];

port.on('message', (m: FleetIn) => {
  if (m.kind === 'declarations') {
    for (const d of m.declarations)
      void publisher.publish({
        node: d.node,
        digest: '',
        keyId: '',
        body: Buffer.from(d.body.buffer, d.body.byteOffset, d.body.byteLength),
      });
  } else if (m.kind === 'stop') {
    void Promise.all(nodes.map((n) => n.stop())).then(async () => {
      await source.stop();
      port.postMessage({ kind: 'stopped' } satisfies FleetOut);
    });
  }
});

await source.start((d) => {
  out.push(d);
  if (!flushing) {
    flushing = true;
    setImmediate(flush);
  }
});
nodes = settings.nodes.map((id) =>
  createSimulatedNode({ link: broker.nodeLink(id), verifyingKey: key, verify, logger, applyDelayMs: settings.applyMs, aliveEveryMs: 0 }),
);
await Promise.all(nodes.map((n) => n.start()));
port.postMessage({ kind: 'ready', tid: ownThreadId() } satisfies FleetOut);
