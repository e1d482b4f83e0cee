import { streamOf } from '../core/events/index.ts';
import type { ReadStreamOptions, SendFound } from './port.ts';
import type { Recorded } from '../core/events/index.ts';

// EventStore.findSend for a store without an index of sends (memory, EventStoreDB): the node's
// stream read newest first, a page at a time, until the send is found. Asked only on the rare
// report naming a digest older than the fold keeps, so reading one node's history is affordable.

const page = 500;

export async function findSendByReading(
  readStream: (stream: string, options?: ReadStreamOptions) => Promise<readonly Recorded[]>,
  node: string,
  digest: string,
): Promise<SendFound | null> {
  const stream = streamOf(node);
  let from: bigint | undefined;
  for (;;) {
    const events = await readStream(stream, { direction: 'backwards', limit: page, ...(from === undefined ? {} : { fromRevision: from }) });
    for (const e of events)
      if (e.type === 'DeclarationSent' && e.data.digest === digest) return { serial: e.data.serial, sentAt: e.data.sentAt };
    const last = events.at(-1);
    if (events.length < page || last === undefined || last.revision === 0n) return null;
    from = last.revision - 1n;
  }
}
