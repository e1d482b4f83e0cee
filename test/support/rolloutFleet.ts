import { createRolloutDriver } from '../../src/engine/rolloutDriver.ts';
import type { RolloutDriver, RolloutDriverOptions } from '../../src/engine/rolloutDriver.ts';
import { startRollout } from '../../src/engine/rolloutCommands.ts';
import type { StartRolloutInput } from '../../src/engine/rolloutCommands.ts';
import { makeReportReceived, rolloutStreamOf, streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded, RolloutEvent } from '../../src/core/events/index.ts';
import { createProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import type { ProjectionRunner } from '../../src/readModel/projectionRunner.ts';
import { createMemoryEventStore } from '../../src/store/memoryEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import type { Report } from '../../src/core/wire/index.ts';
import { foldRolloutEvents } from '../../projections/index.ts';
import type { RolloutState } from '../../src/core/rollout/index.ts';
import { testKey } from './history.ts';
import { logger } from './logger.ts';

// A rollout on a store with no broker: the projection runner folds the node streams,
// the driver decides, and a scripted fleet answers each declaration by appending the report its
// node would send, as ingest records it. Time is the test's: the driver and the reports read
// the same controlled clock, so a wave's timeout passes when the test says so.

/**
 * How a node answers a declaration: apply it, refuse it, fail a resource, say nothing (the test
 * reports for it), or — the seed's race — report only about the declaration it was sent before.
 */
export type NodeBehaviour = 'apply' | 'refuse' | 'degrade' | 'silent' | 'stale';

export type RolloutFleet = Readonly<{
  store: EventStore;
  runner: ProjectionRunner;
  driver: RolloutDriver;
  /** The controlled clock, and moving it (the wall clock and the monotonic one together). */
  now: () => Date;
  tick: (ms: number) => void;
  /** Step the wall clock alone, as NTP or an operator's date would (the monotonic clock stays). */
  stepWall: (ms: number) => void;
  /** Start a rollout through the operator's command. */
  start: (input: Partial<StartRolloutInput> & Pick<StartRolloutInput, 'selection'>) => Promise<string>;
  /** The rollout folded from the store. */
  rollout: (id: string) => Promise<RolloutState>;
  events: (id: string) => Promise<readonly Recorded<RolloutEvent>[]>;
  /** Append the report a node sends about `declared` (a digest), as ingest would. */
  report: (node: string, fields: Partial<Report>) => Promise<void>;
  /** Declarations each node was sent, in store order. */
  sentTo: (node: string) => Promise<readonly Recorded<DeclarationSent>[]>;
  behave: (node: string, b: NodeBehaviour) => void;
  /** Wait until the read model folded everything stored, then for a whole round of decisions. */
  settle: () => Promise<void>;
  stop: () => Promise<void>;
}>;

export async function rolloutFleet(
  options: Readonly<{
    behaviour?: Readonly<Record<string, NodeBehaviour>>;
    store?: EventStore;
    driver?: Partial<RolloutDriverOptions>;
    /** Start the driver (default true). */
    drive?: boolean;
  }> = {},
): Promise<RolloutFleet> {
  const store = options.store ?? createMemoryEventStore();
  let clock = Date.parse('2026-11-30T14:00:00Z');
  let monotonic = 0;
  const now = (): Date => new Date(clock);
  const behaviour = new Map(Object.entries(options.behaviour ?? {}));
  const runner = createProjectionRunner({ store, logger, now: () => clock });
  let msg = 0;
  const report = async (node: string, fields: Partial<Report>): Promise<void> => {
    const r: Report = { node, applied: [], failed: {}, refused: '', carried: [], declared: null, ...fields };
    const e = makeReportReceived(
      r,
      Buffer.from(JSON.stringify(r)),
      { messageId: `fleet-${++msg}`, redelivered: false, userId: node },
      now(),
    );
    await store.append([{ stream: streamOf(node), expected: 'any', events: [e] }]);
  };
  const answering: Promise<void>[] = [];
  const previous = new Map<string, string>();
  runner.readModel.onChange((c) => {
    if (c.event.type !== 'DeclarationSent') return;
    const d = c.event.data;
    const before = previous.get(d.node);
    previous.set(d.node, d.digest);
    const b = behaviour.get(d.node) ?? 'apply';
    if (b === 'silent') return;
    if (b === 'stale') {
      if (before !== undefined) answering.push(report(d.node, { declared: before, applied: [...d.resourceIds] }));
      return;
    }
    const fields: Partial<Report> =
      b === 'apply'
        ? { declared: d.digest, applied: [...d.resourceIds] }
        : b === 'refuse'
          ? { declared: d.digest, refused: 'policy: not on this host' }
          : { declared: d.digest, applied: d.resourceIds.slice(1), failed: { [d.resourceIds[0] ?? 'web']: 'image pull failed' } };
    answering.push(report(d.node, fields));
  });
  await runner.start();
  await runner.caughtUp();
  const driver = createRolloutDriver({
    store,
    key: testKey,
    logger,
    now,
    monotonic: () => monotonic,
    nodeOf: (n) => runner.readModel.get(n),
    progress: (s) => runner.rollouts.progressAt(s),
    readModelPosition: () => runner.readModel.position(),
    onNodeChange: (l) => runner.readModel.onChange((c) => l(c.node)),
    pollMs: 10,
    minIntervalMs: 1,
    ...options.driver,
  });
  if (options.drive !== false) driver.start();

  const events = async (id: string): Promise<readonly Recorded<RolloutEvent>[]> =>
    (await store.readStream(rolloutStreamOf(id))) as Recorded<RolloutEvent>[];
  const settle = async (): Promise<void> => {
    for (let i = 0; i < 3; i++) {
      await Promise.all(answering.splice(0));
      const head = await store.headPosition();
      while (head !== null && (runner.readModel.position() ?? -1n) < head) await new Promise((r) => setTimeout(r, 2));
      if (driver.active()) await driver.nextRound();
    }
  };
  return {
    store,
    runner,
    driver,
    now,
    tick: (ms) => {
      clock += ms;
      monotonic += ms;
    },
    stepWall: (ms) => void (clock += ms),
    async start(input) {
      const nodeStates = () => runner.readModel.nodes();
      const r = await startRollout(
        { store, now, nodeStates },
        {
          resources: [
            { id: 'web', image: 'nginx:1.27' },
            { id: 'sidecar', image: 'envoy:1' },
          ],
          waves: '100%',
          maxFailures: '0',
          waveTimeoutMs: 60_000,
          startedBy: 'test',
          ...input,
        },
      );
      driver.wake();
      return r.rollout;
    },
    async rollout(id) {
      const s = foldRolloutEvents(await events(id));
      if (s === null) throw new Error(`no rollout ${id}`);
      return s;
    },
    events,
    report,
    sentTo: async (node) =>
      (await store.readStream(streamOf(node))).filter((e): e is Recorded<DeclarationSent> => e.type === 'DeclarationSent'),
    behave: (node, b) => void behaviour.set(node, b),
    settle,
    async stop() {
      await driver.stop();
      await Promise.all(answering.splice(0));
      await runner.stop();
    },
  };
}
