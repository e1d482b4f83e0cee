import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import fc from 'fast-check';
import type { RolloutState } from '../../src/core/rollout/index.ts';
import { signingKeyFromSeed, specDigestOf } from '../../src/core/declaration/index.ts';
import type { Declaration } from '../../src/core/declaration/index.ts';
import { readRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
import { createSender } from '../../src/engine/send.ts';
import { rolloutStreamOf, streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/core/events/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { replayStore } from '../../src/readModel/replay.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { createAmqpNodeLink } from '../../src/transport/amqpNodeLink.ts';
import { killHard, startFaultChild, stopGently } from '../support/faults/faultChild.ts';
import { logger } from '../support/logger.ts';
import { sleep, until } from '../support/until.ts';
import { faultSeed, withNodes } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// A rollback over real RabbitMQ and simulated nodes, with the engine (as `serve` builds it)
// SIGKILLed while it runs (docs/design.md §8, "Rollback"). Every node first applies a previous
// spec; the rollout's last node fails the new spec's probe, so the rollout halts and, under
// rollbackOnHalt all, rolls every node back. The nodes apply their rollback declaration only once
// the kills are done, so every kill falls while the rollback runs. Then: every node got exactly one
// rollback declaration, whose spec is byte-equal to the previous one; every node's latest report
// names the digest of its restored declaration; and the rollout's history is the sequence
// halted → rollback started → rollback sent → rollback completed.

const killCount = (): number => Math.max(5, Number(process.env['CONVERGE_FAULT_ROLLBACK_KILLS'] ?? 6));
const nodeCount = 8;
const previous = [{ id: 'web', image: 'registry.local/web:6' }];
const next = [
  { id: 'web', image: 'registry.local/web:7' },
  { id: 'probe', image: 'registry.local/probe:1' },
];

export const rollbackSigkill: Scenario = {
  name: 'rollback under engine SIGKILL',
  faults: `engine process (serve: ingest, relay, projections, rollout driver) SIGKILLed ${killCount()}× at seeded random moments while a halted rollout of ${nodeCount} nodes rolls all of them back over RabbitMQ, restarted each time`,
  run: (lab) =>
    withNodes(lab, 'back', nodeCount, async (conns) => {
      const path = join(lab.dir, 'rollback.db');
      const kills = killCount();
      const seed = faultSeed('rollback under engine SIGKILL');
      const dwellMs = fc.sample(fc.integer({ min: 0, max: 500 }), { numRuns: kills, seed });
      const keySeed = randomBytes(32);
      const key = signingKeyFromSeed(keySeed);
      const spawnChild = (): Promise<ChildProcess> =>
        startFaultChild('./rolloutEngineChild.ts', {
          CONVERGE_FAULT_AMQP_URL: lab.engineUrl,
          CONVERGE_FAULT_STORE: path,
          CONVERGE_FAULT_KEY_SEED: keySeed.toString('hex'),
        });
      let killsDone = (): void => {};
      const afterKills = new Promise<void>((resolve) => (killsDone = resolve));
      const previousDigest = specDigestOf(previous);
      // A node that has seen the new spec holds the previous one back (its rollback) until the kills are done.
      const sawNext = new Set<string>();
      const nodes: SimulatedNode[] = conns.map((c, i) =>
        createSimulatedNode({
          link: createAmqpNodeLink(c.conn, { node: c.node, logger }),
          verifyingKey: key,
          logger,
          applyDelayMs: 20,
          aliveEveryMs: 0,
          ...(i === conns.length - 1 ? { fail: (id: string) => (id === 'probe' ? 'probe failed: 502 from /healthz' : null) } : {}),
          beforeApply: async (d: Declaration) => {
            if (d.resources.some((r) => r.id === 'probe')) sawNext.add(c.node);
            else if (sawNext.has(c.node)) await afterKills;
          },
        }),
      );
      const consuming = Promise.allSettled(nodes.map((n) => n.start()));
      let child = await spawnChild();
      const reader = createSqliteEventStore(path);
      let killed = 0;
      let killedWhileRollingBack = 0;
      try {
        const targets = conns.map((c) => c.node);
        // The previous spec, applied everywhere before the rollout.
        const sender = createSender({ store: reader, key });
        for (const n of targets) await sender.send(n, previous);
        await until(
          'every node to apply the previous spec',
          async () => {
            const states = await replayStore(reader);
            return targets.every((n) => states.get(n)?.status === 'converged');
          },
          120_000,
        );
        const { rollout: id } = await startRollout(
          { store: reader, now: () => new Date(), nodeStates: () => [] },
          {
            rollout: 'rollback-faults',
            resources: next,
            selection: { kind: 'nodes', nodes: targets },
            waves: '50%,100%',
            maxFailures: '0',
            waveTimeoutMs: 300_000,
            rollbackOnHalt: 'all',
            startedBy: 'faults',
          },
        );
        const status = async (): Promise<RolloutState['status'] | null> => (await readRollout(reader, id))?.status ?? null;
        // Kills are synchronised with progress: they begin once the rollback has begun.
        await until('the rollout to halt and begin its rollback', async () => (await status()) === 'rollingBack', 180_000);
        let restartedAt = Date.now();
        for (const dwell of dwellMs) {
          await sleep(dwell);
          if ((await status()) === 'rollingBack') killedWhileRollingBack++;
          await killHard(child);
          killed++;
          child = await spawnChild();
          restartedAt = Date.now();
        }
        killsDone();
        const end = await until('the rollback to end', async () => ((await status()) === 'rolledBack' ? 'rolledBack' : null), 180_000);
        const recoverMs = Date.now() - restartedAt;
        const s = (await readRollout(reader, id))!;

        const backs = new Map<string, Recorded<DeclarationSent>[]>();
        for (const n of targets) {
          const sends = (await reader.readStream(streamOf(n))).filter(
            (e): e is Recorded<DeclarationSent> =>
              e.type === 'DeclarationSent' && e.data.rollout?.id === id && e.data.rollout.rollback === true,
          );
          backs.set(n, sends);
        }
        const replayed = await replayStore(reader);
        const once = targets.filter((n) => backs.get(n)!.length === 1);
        const restored = targets.filter((n) => {
          const b = backs.get(n)![0];
          const st = replayed.get(n);
          return (
            b !== undefined && b.data.specDigest === previousDigest && st?.reported?.declared === b.data.digest && st.status === 'converged'
          );
        });
        // Each node applied its one rollback digest (a relay's redelivery after a kill carries the same digest, and is
        // recognised by it, as in the rollout scenario), and no other rollback.
        const appliedOnce = nodes.every((n) => {
          const b = backs.get(n.node)![0]?.data.digest;
          const rollbacks = new Set(n.applied().filter((d) => backs.get(n.node)!.some((e) => e.data.digest === d)));
          return b !== undefined && rollbacks.size === 1 && rollbacks.has(b);
        });
        const types: string[] = (await reader.readStream(rolloutStreamOf(id))).map((e) => e.type);
        const order = ['RolloutHalted', 'RollbackStarted', 'RollbackSent', 'RollbackCompleted'].map((t) => types.indexOf(t));
        const stored = [...backs.values()].reduce((a, xs) => a + xs.length, 0);
        const result: ScenarioResult = {
          scenario: rollbackSigkill.name,
          faults: rollbackSigkill.faults,
          sent: targets.length,
          confirmed: restored.length,
          stored,
          lost: targets.length - restored.length,
          duplicated: stored - once.length,
          hostileTried: 0,
          hostileAppended: 0,
          recoverMs,
          notes: [
            `seed ${seed}; ${killed} SIGKILLs (${killedWhileRollingBack} while the rollback ran), each followed by a restart (dwell ${Math.min(...dwellMs)}–${Math.max(...dwellMs)} ms)`,
            `rollout ${end}: halted in wave ${s.halted?.wave ?? '?'}; rollback ${s.rollback?.completed?.done ?? 0} done, ${s.rollback?.completed?.failed ?? 0} failed; history ${types.join(' → ')}`,
          ],
          checks: {
            killedWhileRollingBack: killedWhileRollingBack >= kills,
            rolledBack: end === 'rolledBack' && s.rollback?.completed?.done === targets.length,
            oneRollbackDeclarationEach: once.length === targets.length,
            eachAppliedItsRollback: appliedOnce,
            eachReportsItsRestoredDigest: restored.length === targets.length,
            historyInOrder:
              order.every((x, i) => x >= 0 && (i === 0 || x > order[i - 1]!)) && types.filter((t) => t === 'RollbackStarted').length === 1,
          },
        };
        return result;
      } finally {
        killsDone();
        await stopGently(child);
        await Promise.all(nodes.map((n) => n.stop().catch(() => undefined)));
        await consuming;
        await reader.close();
      }
    }),
};
