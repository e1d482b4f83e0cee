import { FORWARDS, START } from '@eventstore/db-client';
import { isEventType } from '../../core/events/index.ts';
import { createTreeBuilder, storedLeafHash } from '../audit/auditTree.ts';
import type { AuditHead, ReadStoredOptions, StoredRecord } from '../port.ts';
import type { EsdbClient } from './esdbClient.ts';
import { esdbError } from './esdbErrors.ts';
import { toPosition } from './esdbReads.ts';

// EventStoreDB and the audit tree (docs/audit.md): the server runs no code of ours inside its
// writes, so no leaf or head can be written in the append's transaction, and a second write after
// each append would be a round trip that a crash can separate from the events. What can be done is
// verify-only: the tree computed from a read of $all, now. Its client hands JSON events back
// parsed, so the bytes hashed are a re-encoding (JSON.stringify) of what the server holds.

export type EsdbAudit = Readonly<{
  readStored: (options?: ReadStoredOptions) => Promise<StoredRecord[]>;
  auditHead: () => Promise<AuditHead>;
}>;

export function createEsdbAudit(client: EsdbClient, open: () => void): EsdbAudit {
  async function readStored(options: ReadStoredOptions = {}): Promise<StoredRecord[]> {
    open();
    const after = options.after ?? null;
    const limit = options.limit ?? 1000;
    const out: StoredRecord[] = [];
    try {
      let from = after;
      for (;;) {
        let raw = 0;
        let last: bigint | null = null;
        for await (const r of client.readAll({
          direction: FORWARDS,
          fromPosition: from === null ? START : toPosition(from),
          maxCount: limit,
        })) {
          raw++;
          const e = r.event;
          if (e === undefined) continue;
          last = e.position.commit;
          if ((after !== null && last <= after) || !isEventType(e.type) || !e.isJson || out.length >= limit) continue;
          out.push({
            position: last,
            id: e.id,
            stream: e.streamId,
            revision: e.revision,
            type: e.type,
            data: Buffer.from(JSON.stringify(e.data), 'utf8'),
            metadata: Buffer.from(JSON.stringify(e.metadata ?? {}), 'utf8'),
            leafHash: null,
          });
        }
        if (out.length >= limit || raw < limit || last === null || last === from) return out;
        from = last;
      }
    } catch (err) {
      throw esdbError(err, 'read $all');
    }
  }

  async function auditHead(): Promise<AuditHead> {
    const tree = createTreeBuilder();
    let after: bigint | null = null;
    for (;;) {
      const page = await readStored({ after, limit: 1000 });
      if (page.length === 0) break;
      for (const r of page) {
        tree.appendLeafHash(
          storedLeafHash(
            r.position,
            r.stream,
            r.revision,
            r.type,
            Buffer.from(r.data).toString('utf8'),
            Buffer.from(r.metadata).toString('utf8'),
          ),
        );
      }
      after = page.at(-1)!.position;
    }
    return { size: BigInt(tree.size), root: tree.root().toString('hex'), denseFrom: null, keptByStore: false };
  }

  return { readStored, auditHead };
}
