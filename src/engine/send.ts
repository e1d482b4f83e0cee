import { createDeclarationRecorder } from './sendBatch.ts';
import type { BatchSenderOptions } from './sendBatch.ts';

// One declaration to one node: a batch of one through sendBatch.ts, so a single send and a bulk
// one are validated, signed, recorded and retried by the same code. A single send answers with
// its declaration or throws its refusal whole (code, details and cause), as the API and the CLI
// report it.

/** A single send takes the batch sender's options: it is a batch of one. */
export type SenderOptions = BatchSenderOptions;

export type SendResult = Readonly<{ digest: string; serial: number; position: bigint | null }>;
/** `resources` unchecked: the sender validates the spec (and the node id), once, for every caller. */
export type Sender = Readonly<{
  /** `force`: send to a pinned node too (docs/design.md §8 "Holds and pins"). */
  send: (node: string, resources: unknown, options?: Readonly<{ force?: boolean }>) => Promise<SendResult>;
}>;

export function createSender(options: SenderOptions): Sender {
  const record = createDeclarationRecorder(options);
  return {
    send: async (node, resources, opts) => {
      const r = await record([{ node, resources }], opts?.force === true ? { force: true } : {});
      const outcome = r.outcomes[0]!;
      if (!outcome.ok) throw outcome.error;
      return { digest: outcome.digest, serial: outcome.serial, position: r.position };
    },
  };
}
