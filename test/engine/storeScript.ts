import pino from 'pino';
import type { Resource } from '../../src/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../../src/events/index.ts';
import type { NewEvent } from '../../src/store/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { Report } from '../../src/wire/index.ts';
import { testKey } from '../support/history.ts';

// Appends sends, reports and alives to a real store with a controlled clock, so engine, API
// and CLI tests drive the same code paths the ingest and the sender do.

export const silentLogger = pino({ level: 'silent' });

export function storeScript(store: EventStore, start = Date.parse('2026-11-29T14:00:00Z')) {
  let clock = start;
  const serials = new Map<string, number>();
  const digests = new Map<string, string[]>();
  let msg = 0;
  const append = async (node: string, e: NewEvent): Promise<bigint> => {
    const r = await store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
    return r.position ?? -1n;
  };
  return {
    tick(ms = 1000): Date {
      clock += ms;
      return new Date(clock);
    },
    now: () => new Date(clock),
    /** Digests sent to a node so far, oldest first. */
    digests: (node: string): readonly string[] => digests.get(node) ?? [],
    async send(
      node: string,
      resources: readonly Resource[] = [{ id: 'web' }],
    ): Promise<{ digest: string; serial: number; position: bigint }> {
      const serial = (serials.get(node) ?? 0) + 1;
      serials.set(node, serial);
      const e = makeDeclarationSent({ node, serial, resources, key: testKey, now: new Date(clock) });
      digests.set(node, [...(digests.get(node) ?? []), e.data.digest]);
      return { digest: e.data.digest, serial, position: await append(node, e) };
    },
    async report(node: string, fields: Partial<Report> = {}): Promise<bigint> {
      const report: Report = { node, applied: [], failed: {}, refused: '', carried: [], declared: null, ...fields };
      return append(
        node,
        makeReportReceived(
          report,
          Buffer.from(JSON.stringify(report)),
          { messageId: `m-${++msg}`, redelivered: false, userId: node },
          new Date(clock),
        ),
      );
    },
    async alive(node: string): Promise<bigint> {
      return append(node, makeAliveSeen({ node }, new Date(clock)));
    },
  };
}
