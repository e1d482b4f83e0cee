import { checkCarriedPorts, validateSpec } from '../declaration/index.ts';
import type { SigningKey } from '../declaration/index.ts';
import { validateNodeId } from '../wire/nodeId.ts';
import { ConvergeError, isConvergeError } from '../errors.ts';
import { makeDeclarationSent, streamOf } from '../events/index.ts';
import type { EventStore } from '../store/port.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import type { NodeState } from '../../projections/index.ts';

// Send = record. The DeclarationSent event is appended *before* anything is published: the
// store is the outbox (DESIGN §2), and the relay publishes from it. The append names the
// revision the serial was derived from, so two concurrent sends cannot take the same serial:
// the loser re-reads and takes the next one.

export type LoadNode = (node: string) => Promise<Pick<NodeState, 'revision' | 'carried' | 'sent'>>;

export type SenderOptions = Readonly<{
  store: EventStore;
  key: SigningKey;
  now?: () => Date;
  /** How to learn the node's state; default folds its stream. Inject a read model to skip the read. */
  loadNode?: LoadNode;
  /** Attempts when another send wins the race for the same revision. */
  maxAttempts?: number;
}>;

export type SendResult = Readonly<{ digest: string; serial: number; position: bigint | null }>;
export type Sender = Readonly<{ send: (node: string, resources: unknown) => Promise<SendResult> }>;

export const foldNodeFromStore =
  (store: EventStore): LoadNode =>
  async (node) =>
    foldNodeEvents(node, await store.readStream(streamOf(node)));

export function createSender(options: SenderOptions): Sender {
  const { store, key } = options;
  const now = options.now ?? (() => new Date());
  const fromStore = foldNodeFromStore(store);
  const loadNode = options.loadNode ?? fromStore;
  const maxAttempts = options.maxAttempts ?? 5;

  async function send(node: string, resources: unknown): Promise<SendResult> {
    // The id becomes a queue name, routing key and broker user: the accounts' rule, one place.
    validateNodeId(node);
    const spec = validateSpec({ resources });
    let lastErr: unknown = null;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      // After a lost race an injected read model may lag the store; the store itself cannot.
      const state = await (attempt === 1 ? loadNode : fromStore)(node);
      checkCarriedPorts(spec, state.carried);
      const serial = (state.sent?.serial ?? 0) + 1;
      const event = makeDeclarationSent({ node, serial, resources: spec.resources, key, now: now() });
      try {
        const r = await store.append([
          { stream: streamOf(node), expected: state.revision < 0n ? 'no_stream' : state.revision, events: [event] },
        ]);
        if (r.streams[0]?.written === 1) return { digest: event.data.digest, serial, position: r.position };
        // The id (node + serial) was already stored, so the store took this as a retry. This call
        // never retries an append whose outcome it does not know, so it is not ours: another send
        // took this serial first — even one with identical bytes (same spec, same second) is a
        // send of its own, and DESIGN §1 gives every send its own serial.
        lastErr = new ConvergeError('CONVERGE_ERR_WRONG_EXPECTED_REVISION', `serial ${serial} of ${node} was taken by another send`);
      } catch (err) {
        if (!isConvergeError(err, 'CONVERGE_ERR_WRONG_EXPECTED_REVISION')) throw err;
        lastErr = err;
      }
    }
    throw new ConvergeError(
      'CONVERGE_ERR_WRONG_EXPECTED_REVISION',
      `send to ${node}: the stream kept moving; gave up after ${maxAttempts} attempts`,
      { cause: lastErr },
    );
  }

  return { send };
}
