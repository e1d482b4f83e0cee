import { signingKeyFromSeed } from '../../src/declaration/index.ts';
import type { Resource } from '../../src/declaration/index.ts';
import { makeAliveSeen, makeDeclarationSent, makeReportReceived, streamOf } from '../../src/events/index.ts';
import type { ConvergeEvent, Recorded } from '../../src/events/index.ts';
import type { Report } from '../../src/wire/index.ts';

// Builds one node's recorded history the way a store would number it, for fold tests.

export const testKey = signingKeyFromSeed(Buffer.alloc(32, 7));

export function history(node: string, start = Date.parse('2026-11-29T14:00:00Z')) {
  const events: Recorded[] = [];
  let clock = start;
  let serial = 0;
  let msg = 0;
  const record = <E extends ConvergeEvent>(e: E & { id: string }): Recorded<E> => {
    const r = { ...e, stream: streamOf(node), revision: BigInt(events.length), position: BigInt(events.length + 1) * 10n } as Recorded<E>;
    events.push(r);
    return r;
  };
  return {
    events,
    /** Advance the clock by ms and return the new time. */
    tick(ms = 1000): Date {
      clock += ms;
      return new Date(clock);
    },
    now: () => new Date(clock),
    send(resources: readonly Resource[] = [{ id: 'web' }]) {
      return record(makeDeclarationSent({ node, serial: ++serial, resources, key: testKey, now: new Date(clock) }));
    },
    report(fields: Partial<Report> = {}) {
      const report: Report = { node, applied: [], failed: {}, refused: '', carried: [], declared: null, ...fields };
      return record(
        makeReportReceived(
          report,
          Buffer.from(JSON.stringify(report)),
          { messageId: `m-${++msg}`, redelivered: false, userId: node },
          new Date(clock),
        ),
      );
    },
    alive() {
      return record(makeAliveSeen({ node }, new Date(clock)));
    },
  };
}
