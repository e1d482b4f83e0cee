// What bench/engine.ts drains: stores that already hold a declaration per node, and the reports
// that match them, published into mesh.reports as nodes would send them.
import amqp from 'amqplib';
import type { SigningKey } from '../../src/core/declaration/index.ts';
import { makeDeclarationSent, streamOf } from '../../src/core/events/index.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import type { StreamWrite } from '../../src/store/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

export type Prefilled = Readonly<{ head: bigint; digests: ReadonlyMap<string, string> }>;

/**
 * A store that already holds one declaration per node (so reports match and the fold does its
 * full work), written through the engine's own event constructor and store, with the relay's
 * checkpoint at the head: those declarations count as delivered, and no inbox is declared.
 */
export async function prefillStore(path: string, nodes: readonly string[], key: SigningKey): Promise<Prefilled> {
  const store = createSqliteEventStore(path);
  const digests = new Map<string, string>();
  const now = new Date();
  for (let i = 0; i < nodes.length; i += 1_000) {
    const writes: StreamWrite[] = nodes.slice(i, i + 1_000).map((node) => {
      const e = makeDeclarationSent({ node, serial: 1, resources: [{ id: 'web' }, { id: 'db' }], key, now });
      digests.set(node, e.data.digest);
      return { stream: streamOf(node), expected: 'no_stream', events: [e] };
    });
    await store.append(writes);
  }
  const head = (await store.headPosition()) ?? 0n;
  await store.setCheckpoint('relay', head);
  await store.close();
  return { head, digests };
}

export const reportBody = (node: string, declared: string): Buffer =>
  encodeReport({ node, applied: ['web', 'db'], failed: {}, refused: '', carried: [8080], declared });

/** `count` reports into mesh.reports, round robin over the nodes, confirmed by the broker. */
export async function fillQueue(
  url: string,
  nodes: readonly string[],
  digests: ReadonlyMap<string, string>,
  count: number,
  tag: string,
): Promise<void> {
  const lanes = 4;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const conn = await amqp.connect(url);
      const ch = await conn.createConfirmChannel();
      for (let i = lane; i < count; i += lanes) {
        const node = nodes[i % nodes.length]!;
        const ok = ch.publish('mesh', 'report', reportBody(node, digests.get(node)!), {
          persistent: true,
          userId: node,
          messageId: `${tag}-${i}`,
          contentType: 'application/json',
        });
        if (!ok) await new Promise((r) => ch.once('drain', r));
        if (i % 4_000 < lanes) await ch.waitForConfirms();
      }
      await ch.waitForConfirms();
      await conn.close();
    }),
  );
}
