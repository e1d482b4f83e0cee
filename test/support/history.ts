import { signingKeyFromSeed } from '../../src/core/declaration/index.ts';
import type { Resource } from '../../src/core/declaration/index.ts';
import {
  makeAliveSeen,
  makeDeclarationSent,
  makeNodeHeard,
  makeNodeRetired,
  makeNodeSilent,
  makeReportReceived,
  observationStream,
  streamOf,
} from '../../src/core/events/index.ts';
import type {
  AliveSeen,
  ConvergeEvent,
  DeclarationSent,
  NodeHeard,
  NodeSilent,
  ObservationStarted,
  ObservationStopped,
  Recorded,
  ReportReceived,
  WithId,
} from '../../src/core/events/index.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { Report } from '../../src/core/wire/index.ts';

// A scripted history: sends, reports and alives on a controlled clock, made by the same functions
// the sender and the ingest use (src/core/events/make.ts). One vocabulary, two places to put it:
//   history(node)          one node's events in memory, numbered as a store numbers them — for folds;
//   historyInStore(store)  the same events appended to a real store — for engine, API and CLI tests.

export const testKey = signingKeyFromSeed(Buffer.alloc(32, 7));

/** A rollout's tag on a send. */
export type RolloutTag = Readonly<{ id: string; wave: number }>;
export const historyStart = Date.parse('2026-11-29T14:00:00Z');

/** The clock, the serials and the message ids a history shares between its events. */
function scriptedEvents(start: number) {
  let clock = start;
  let msg = 0;
  const serials = new Map<string, number>();
  const digests = new Map<string, string[]>();
  return {
    /** Advance the clock by `ms` and return the new time. */
    tick(ms = 1000): Date {
      clock += ms;
      return new Date(clock);
    },
    now: (): Date => new Date(clock),
    /** Digests sent to a node so far, oldest first. */
    digests: (node: string): readonly string[] => digests.get(node) ?? [],
    /** The node's next declaration (serial 1, 2, …) signed by `testKey`; a rollout's send if `rollout` is given. */
    send(node: string, resources: readonly Resource[] = [{ id: 'web' }], rollout?: RolloutTag): WithId<DeclarationSent> {
      const serial = (serials.get(node) ?? 0) + 1;
      serials.set(node, serial);
      const e = makeDeclarationSent({
        node,
        serial,
        resources,
        key: testKey,
        now: new Date(clock),
        ...(rollout === undefined ? {} : { rollout }),
      });
      digests.set(node, [...(digests.get(node) ?? []), e.data.digest]);
      return e;
    },
    /** A report as ingest records it; unset fields are the Go node's omitempty defaults. */
    report(node: string, fields: Partial<Report> = {}): WithId<ReportReceived> {
      const report: Report = { node, applied: [], failed: {}, refused: '', carried: [], declared: null, ...fields };
      const transport = { messageId: `m-${++msg}`, redelivered: false, userId: node };
      return makeReportReceived(report, Buffer.from(JSON.stringify(report)), transport, new Date(clock));
    },
    alive: (node: string): WithId<AliveSeen> => makeAliveSeen({ node }, new Date(clock)),
    /** Liveness transitions as the engine records them (docs/design.md §2). */
    heard: (node: string, before: number | null): WithId<NodeHeard> => makeNodeHeard(node, clock, before),
    silent: (node: string, lastSeen: number, graceMs: number): WithId<NodeSilent> => makeNodeSilent(node, lastSeen, clock, graceMs),
  };
}

/** One node's history in memory: each step returns the Recorded event; `events` holds them all, in order. */
export function history(node: string, start = historyStart) {
  const script = scriptedEvents(start);
  const events: Recorded[] = [];
  const record = <E extends ConvergeEvent>(e: WithId<E>): Recorded<E> => {
    const r = { ...e, stream: streamOf(node), revision: BigInt(events.length), position: BigInt(events.length + 1) * 10n } as Recorded<E>;
    events.push(r);
    return r;
  };
  return {
    events,
    tick: script.tick,
    now: script.now,
    send: (resources?: readonly Resource[], rollout?: RolloutTag) => record(script.send(node, resources, rollout)),
    report: (fields?: Partial<Report>) => record(script.report(node, fields)),
    alive: () => record(script.alive(node)),
    heard: (before: number | null = null) => record(script.heard(node, before)),
    silent: (lastSeen: number, graceMs: number) => record(script.silent(node, lastSeen, graceMs)),
  };
}

export type StoreHistory = ReturnType<typeof historyInStore>;

/** An engine's start or end of observing (docs/design.md §3 "Not observed"), appended where engines record theirs. */
export const recordObservation = (store: EventStore, e: WithId<ObservationStarted | ObservationStopped>) =>
  store.append([{ stream: observationStream, expected: 'any', events: [e] }]);

/** The same steps for any node, appended to `store`; each resolves once its event is stored. */
export function historyInStore(store: EventStore, start = historyStart) {
  const script = scriptedEvents(start);
  const append = async (node: string, e: WithId<ConvergeEvent>): Promise<bigint> => {
    const r = await store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
    return r.position ?? -1n;
  };
  return {
    tick: script.tick,
    now: script.now,
    digests: script.digests,
    async send(
      node: string,
      resources?: readonly Resource[],
      rollout?: RolloutTag,
    ): Promise<{ digest: string; serial: number; position: bigint }> {
      const e = script.send(node, resources, rollout);
      return { digest: e.data.digest, serial: e.data.serial, position: await append(node, e) };
    },
    report: (node: string, fields?: Partial<Report>): Promise<bigint> => append(node, script.report(node, fields)),
    alive: (node: string): Promise<bigint> => append(node, script.alive(node)),
    heard: (node: string, before: number | null = null): Promise<bigint> => append(node, script.heard(node, before)),
    silent: (node: string, lastSeen: number, graceMs: number): Promise<bigint> => append(node, script.silent(node, lastSeen, graceMs)),
    /** An operator's retirement (docs/design.md §3 "Retired nodes"), named after the stream's last revision. */
    retire: async (node: string, reason = ''): Promise<bigint> => {
      const last = (await store.readStream(streamOf(node), { direction: 'backwards', limit: 1 }))[0]?.revision ?? -1n;
      return append(node, makeNodeRetired(node, last, script.now(), reason));
    },
  };
}
