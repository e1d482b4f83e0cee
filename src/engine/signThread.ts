import { readFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { SigningKey } from '../core/declaration/index.ts';
import type { Resource } from '../core/declaration/index.ts';
import { signDeclarationOf } from '../core/events/index.ts';

// The bulk sender's signing thread (signPool.ts): builds, digests and signs the declarations of a
// batch with the key it was handed at its start, off the engine's event loop. It answers each
// request with the three strings of each declaration, in the request's order; the engine thread
// records them (sendBatch.ts). The key stays in this thread's memory: it is never posted back.

/** `nice`: how much lower than the engine's thread this one runs (setpriority's nice; Linux). */
export type SignThreadData = Readonly<{ key: SigningKey; nice?: number }>;
/** `specs`: each distinct resources list once; `spec` of an item is its index there. `now`: ms since the epoch. */
export type SignRequest = Readonly<{
  id: number;
  now: number;
  specs: readonly (readonly Resource[])[];
  nodes: readonly string[];
  serials: readonly number[];
  spec: readonly number[];
}>;
/** `'ready'` first, once the thread has loaded: until then the sender signs on its own thread. */
export type SignReply = Readonly<{ id: number; digests: string[]; declarations: string[]; signatures: string[] }> | 'ready';

const port = parentPort;
if (port === null) throw new Error('signThread.ts runs as a worker thread');
const { key, nice } = workerData as SignThreadData;
// Signing is background work: where the cores are short, the engine thread (the API, ingest) and
// whatever else runs at the normal priority go first. On Linux a thread's id sets its own priority.
if (nice !== undefined && nice !== 0) {
  try {
    const tid = Number(readFileSync('/proc/thread-self/stat', 'utf8').split(' ')[0]);
    setPriority(tid, Math.min(19, getPriority() + nice));
  } catch {
    // No such file (not Linux), or not allowed: the thread runs at the engine's priority.
  }
}
port.postMessage('ready' satisfies SignReply);
port.on('message', (m: SignRequest) => {
  const now = new Date(m.now);
  const reply = { id: m.id, digests: [] as string[], declarations: [] as string[], signatures: [] as string[] } satisfies SignReply;
  for (let i = 0; i < m.nodes.length; i++) {
    const signed = signDeclarationOf({ node: m.nodes[i]!, serial: m.serials[i]!, resources: m.specs[m.spec[i]!]!, key, now });
    reply.digests.push(signed.digest);
    reply.declarations.push(signed.declaration);
    reply.signatures.push(signed.signature);
  }
  port.postMessage(reply);
});
