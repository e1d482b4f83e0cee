import type { SigningKey } from '../core/declaration/index.ts';
import type { EventStore } from '../store/port.ts';
import { createDeclarationRecorder } from './sendBatch.ts';
import type { LoadNode } from './sendView.ts';

// One declaration to one node: a batch of one through sendBatch.ts, so a single send and a bulk
// one are validated, signed, recorded and retried by the same code. A single send answers with
// its declaration or throws its refusal whole (code, details and cause), as the API and the CLI
// report it.

// Still imported from here by rolloutDriver.ts and rolloutCommands.ts; they live in sendView.ts.
export { createUnseenPause } from './sendView.ts';
export type { LoadNode } from './sendView.ts';

export type SenderOptions = Readonly<{
  store: EventStore;
  key: SigningKey;
  now?: () => Date;
  /** How to learn the node's state; default reads its stream. Inject a read model to skip the read. */
  loadNode?: LoadNode;
  /** Races lost to another send (it took the serial first) before giving up. */
  maxAttempts?: number;
  /** Appends tried again because only the node's own reports and alives moved its stream. */
  maxMoves?: number;
}>;

export type SendResult = Readonly<{ digest: string; serial: number; position: bigint | null }>;
/** `resources` unchecked: the sender validates the spec (and the node id), once, for every caller. */
export type Sender = Readonly<{ send: (node: string, resources: unknown) => Promise<SendResult> }>;

export function createSender(options: SenderOptions): Sender {
  const record = createDeclarationRecorder(options);
  return {
    send: async (node, resources) => {
      const r = await record([{ node, resources }]);
      const outcome = r.outcomes[0]!;
      if (!outcome.ok) throw outcome.error;
      return { digest: outcome.digest, serial: outcome.serial, position: r.position };
    },
  };
}
