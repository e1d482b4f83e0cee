import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import fc from 'fast-check';
import { nodeOutcome } from '../../src/core/rollout/index.ts';
import type { RolloutState } from '../../src/core/rollout/index.ts';
import { signingKeyFromSeed } from '../../src/core/declaration/index.ts';
import { readRollout, startRollout } from '../../src/engine/rolloutCommands.ts';
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

// SIGKILL the engine (as `serve` builds it: ingest, relay, projections, the rollout
// driver) at seeded random moments while a rollout runs over real RabbitMQ and simulated nodes,
// restarting it each time. The rollout must complete; every node must have been recorded — and
// have applied — exactly one declaration from it, however many times a kill fell between a
// decision and its record; and the rollout's events must agree with a replay of the node
// streams: each wave completed once, with the counts the rule gives on the replayed states.

const killCount = (): number => Math.max(10, Number(process.env['CONVERGE_FAULT_ROLLOUT_KILLS'] ?? 12));
const nodeCount = 16;

export const rolloutSigkill: Scenario = {
  name: 'rollout under engine SIGKILL',
  faults: `engine process (serve: ingest, relay, projections, rollout driver) SIGKILLed ${killCount()}× at seeded random moments during a rollout of ${nodeCount} nodes in ${nodeCount} waves over RabbitMQ, restarted each time`,
  run: (lab) =>
    withNodes(lab, 'roll', nodeCount, async (conns) => {
      const path = join(lab.dir, 'rollout.db');
      const kills = killCount();
      const seed = faultSeed('rollout under engine SIGKILL');
      const dwellMs = fc.sample(fc.integer({ min: 0, max: 600 }), { numRuns: kills, seed });
      const applyMs = fc.sample(fc.integer({ min: 50, max: 300 }), { numRuns: conns.length, seed: seed + 1 });
      const keySeed = randomBytes(32);
      const key = signingKeyFromSeed(keySeed);
      const spawnChild = (): Promise<ChildProcess> =>
        startFaultChild('./rolloutEngineChild.ts', {
          CONVERGE_FAULT_AMQP_URL: lab.engineUrl,
          CONVERGE_FAULT_STORE: path,
          CONVERGE_FAULT_KEY_SEED: keySeed.toString('hex'),
        });

      // The last wave's node applies only once the kills are done, so the rollout cannot end
      // before them however fast the earlier waves go: every kill falls while it runs.
      let killsDone = (): void => {};
      const afterKills = new Promise<void>((resolve) => (killsDone = resolve));
      const nodes: SimulatedNode[] = conns.map((c, i) =>
        createSimulatedNode({
          link: createAmqpNodeLink(c.conn, { node: c.node, logger }),
          verifyingKey: key,
          logger,
          applyDelayMs: applyMs[i]!,
          ...(i === conns.length - 1 ? { beforeApply: () => afterKills } : {}),
          aliveEveryMs: 0,
        }),
      );
      // A node's inbox exists once the engine first publishes to it, so its consume is not awaited.
      const consuming = Promise.allSettled(nodes.map((n) => n.start()));
      let child = await spawnChild();
      const reader = createSqliteEventStore(path);
      let killed = 0;
      let killedWhileRunning = 0;
      try {
        const targets = conns.map((c) => c.node);
        const { rollout: id } = await startRollout(
          { store: reader, now: () => new Date(), nodeStates: () => [] },
          {
            rollout: 'faults',
            resources: [{ id: 'web', image: 'registry.local/web:7' }],
            selection: { kind: 'nodes', nodes: targets },
            // One node a wave: as many decisions as there are nodes, for the kills to fall between.
            waves: targets.map((_, i) => String(i + 1)).join(','),
            maxFailures: '0',
            waveTimeoutMs: 300_000,
            startedBy: 'faults',
          },
        );
        const status = async (): Promise<RolloutState['status'] | null> => (await readRollout(reader, id))?.status ?? null;
        let restartedAt = Date.now();
        for (const dwell of dwellMs) {
          await sleep(dwell);
          if ((await status()) === 'running') killedWhileRunning++;
          await killHard(child);
          killed++;
          child = await spawnChild();
          restartedAt = Date.now();
        }
        killsDone();
        const end = await until(
          'the rollout to end',
          async () => {
            const s = await status();
            return s !== null && s !== 'running' && s !== 'paused' ? s : null;
          },
          180_000,
        );
        const recoverMs = Date.now() - restartedAt;
        const s = (await readRollout(reader, id))!;

        // What the store holds: each node's declarations from this rollout, and the node states replayed from zero.
        const tagged = new Map<string, Recorded<DeclarationSent>[]>();
        for (const n of targets) {
          const sends = (await reader.readStream(streamOf(n))).filter(
            (e): e is Recorded<DeclarationSent> => e.type === 'DeclarationSent' && e.data.rollout?.id === id,
          );
          tagged.set(n, sends);
        }
        const replayed = await replayStore(reader);
        const applied = new Map(nodes.map((n) => [n.node, new Set(n.applied())]));
        const stored = [...tagged.values()].reduce((a, xs) => a + xs.length, 0);
        const once = targets.filter((n) => tagged.get(n)!.length === 1);
        const appliedOurs = targets.filter((n) => {
          const ours = tagged.get(n)![0]?.data.digest;
          return ours !== undefined && applied.get(n)!.has(ours);
        });
        // Each node applied exactly one declaration from the rollout (a redelivery is recognised by its digest).
        const appliedOnce = targets.every(
          (n) => [...applied.get(n)!].filter((d) => tagged.get(n)!.some((e) => e.data.digest === d)).length === 1,
        );
        const events = await reader.readStream(rolloutStreamOf(id));
        const count = (t: string) => events.filter((e) => e.type === t).length;
        const waveCount = s.waves.length;
        const doneByReplay = s.waves.map(
          (w) =>
            s.targets.slice(w.from, w.to).filter((n) => nodeOutcome(s.sends.get(n), s.skipped.get(n), replayed.get(n)) === 'done').length,
        );
        const result: ScenarioResult = {
          scenario: rolloutSigkill.name,
          faults: rolloutSigkill.faults,
          sent: targets.length,
          confirmed: appliedOurs.length,
          stored,
          lost: targets.length - appliedOurs.length,
          duplicated: stored - once.length,
          hostileTried: 0,
          hostileAppended: 0,
          recoverMs,
          notes: [
            `seed ${seed}; ${killed} SIGKILLs (${killedWhileRunning} while the rollout ran), each followed by a restart (dwell after ready ${Math.min(...dwellMs)}–${Math.max(...dwellMs)} ms); nodes apply in ${Math.min(...applyMs)}–${Math.max(...applyMs)} ms`,
            `rollout ${end}: ${s.completed?.done ?? 0} of ${targets.length} done in ${waveCount} waves; ${events.length} rollout events (${count('WaveStarted')} wave starts, ${count('WaveCompleted')} wave completions, ${count('RolloutSent')} sends); time to recover = last restart → rollout completed`,
          ],
          checks: {
            killedTenTimesDuringTheRollout: killedWhileRunning >= 10,
            completed: end === 'completed' && s.completed?.done === targets.length,
            oneDeclarationEachRecorded: once.length === targets.length,
            oneDeclarationEachApplied: appliedOnce,
            eachWaveDecidedOnce:
              count('WaveStarted') === waveCount && count('WaveCompleted') === waveCount && count('RolloutCompleted') === 1,
            rolloutEventsEqualReplay: s.waves.every((w, i) => w.completed?.done === doneByReplay[i] && w.completed?.failed === 0),
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
