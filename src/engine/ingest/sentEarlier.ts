import type { Logger } from 'pino';
import type { NodeState } from '../../../projections/index.ts';
import type { NodeEvent } from '../../core/events/index.ts';
import type { EventStore, NewEvent, SendFound } from '../../store/port.ts';
import type { Pending } from './committer.ts';

// The fold keeps only a node's last sends (projections/node/nodeState.ts, sendHistoryLimit) and
// must stay pure, so whether an older digest was ever sent to the node is looked up here, before
// the append, and recorded in the report (ReportReceived's `sentEarlier`): `stale` for a digest
// this node was sent, however long ago, `unknown` only for one never sent to it.

/** What ingest knows of a node's sends (the read model's state): the latest and the kept earlier ones. */
export type KnownSends = (node: string) => Pick<NodeState, 'sent'> | undefined;

export type SentEarlierLookup = (batch: readonly Pending[]) => Promise<readonly Pending[]>;

/**
 * The batch with `sentEarlier` set on each report naming a digest other than its node's latest send
 * as `known` has it (a stale report, an old one, a forged one: rare). Asking for every report but the
 * matching ones, rather than only for those past the kept history, leaves no gap while the read
 * model lags the store by a few sends. A failed lookup leaves the field out: the report is still
 * stored, and folds as reports always did before this field (unknown past the kept history).
 */
export function createSentEarlierLookup(store: EventStore, known: KnownSends, logger: Logger): SentEarlierLookup {
  // Per node, the last digest asked about and the answer: a slow node repeats its old digest in
  // report after report, and a digest's sends to a node never change once made (it names the serial).
  const last = new Map<string, { digest: string; found: SendFound | null }>();

  async function lookUp(node: string, digest: string): Promise<SendFound | null | undefined> {
    const held = last.get(node);
    if (held !== undefined && held.digest === digest) return held.found;
    try {
      const found = await store.findSend(node, digest);
      last.set(node, { digest, found });
      return found;
    } catch (err) {
      logger.warn({ node, err: (err as Error).message }, 'could not look up an old digest; the report is stored without sentEarlier');
      return undefined;
    }
  }

  return async (batch) => {
    let out: Pending[] | null = null;
    const asked: Promise<void>[] = [];
    batch.forEach((p, i) => {
      const e = p.event;
      if (e === null || e.type !== 'ReportReceived' || e.data.declared === null || e.data.sentEarlier !== undefined) return;
      const declared = e.data.declared;
      if (known(e.data.node)?.sent?.digest === declared) return;
      asked.push(
        lookUp(e.data.node, declared).then((found) => {
          if (found === undefined) return;
          const event = { ...e, data: { ...e.data, sentEarlier: found } } as NewEvent<NodeEvent>;
          (out ??= batch.slice())[i] = { delivery: p.delivery, event };
        }),
      );
    });
    if (asked.length === 0) return batch;
    await Promise.all(asked);
    return out ?? batch;
  };
}
