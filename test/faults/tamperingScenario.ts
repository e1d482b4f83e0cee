import assert from 'node:assert/strict';
import { join } from 'node:path';
import fc from 'fast-check';
import { digestOf, generateSigningKey, signDeclaration } from '../../src/core/declaration/index.ts';
import type { SigningKey } from '../../src/core/declaration/index.ts';
import { createIngest } from '../../src/engine/ingest/index.ts';
import { createSender } from '../../src/engine/send.ts';
import type { Sender } from '../../src/engine/send.ts';
import { streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded, ReportReceived } from '../../src/core/events/index.ts';
import { createSimulatedNode } from '../../src/simulation/simulatedNode.ts';
import type { SimulatedNode } from '../../src/simulation/simulatedNode.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import type { EventStore } from '../../src/store/index.ts';
import { createAmqpTransport } from '../../src/transport/amqpTransport.ts';
import type { DeclarationPublisher } from '../../src/transport/port.ts';
import { encodeSigned } from '../../src/core/wire/index.ts';
import { foldNodeEvents } from '../../projections/index.ts';
import { logger } from '../support/logger.ts';
import { until } from '../support/until.ts';
import { faultSeed, readStored, withNodes } from './scenarios.ts';
import type { Scenario, ScenarioResult } from './scenarios.ts';

// Declarations tampered with on the way to a node (docs/design.md §1, ADR 0004 in wire.go): a flipped
// bit anywhere in the declaration bytes or the signature (fast-check picks where), the same
// JSON re-encoded (same content, other bytes), and a signature by the wrong key — each published
// to the node's queue (`node.<id>`) exactly as the relay publishes. The simulated node verifies
// the bytes as received and refuses the declaration whole, naming the reason, with `declared` =
// the digest of the bytes it received (src/simulation/simulatedNode.ts; Report.Refused in wire.go).
// The engine must record the refusal, and the node's state must say what it means:
//   - bytes changed (bit in the declaration, re-encoded): the refusal names a digest never sent
//     → an `unknown` report, the node stays `behind`;
//   - bytes intact, signature bad (bit in the signature, wrong key): the refusal names the
//     digest we sent → the node is caught up with it and `refused`.

export type Tamper =
  | Readonly<{ kind: 'declaration bit'; bit: number }>
  | Readonly<{ kind: 'signature bit'; bit: number }>
  | Readonly<{ kind: 're-encoded' }>
  | Readonly<{ kind: 'wrong key' }>;

const tamperArb: fc.Arbitrary<Tamper> = fc.oneof(
  fc.nat().map((bit): Tamper => ({ kind: 'declaration bit', bit })),
  fc.nat().map((bit): Tamper => ({ kind: 'signature bit', bit })),
);

const flipBit = (bytes: Buffer, bit: number): Buffer => {
  const out = Buffer.from(bytes);
  const i = bit % (out.length * 8);
  out[i >> 3] = (out[i >> 3] ?? 0) ^ (1 << (i & 7));
  return out;
};

/** The tampered (declaration, signature) and whether the declaration's bytes still are the ones sent. */
function tamper(
  t: Tamper,
  declaration: Buffer,
  signature: Buffer,
  otherKey: SigningKey,
): { declaration: Buffer; signature: Buffer; bytesIntact: boolean } {
  switch (t.kind) {
    case 'declaration bit':
      return { declaration: flipBit(declaration, t.bit), signature, bytesIntact: false };
    case 'signature bit':
      return { declaration, signature: flipBit(signature, t.bit), bytesIntact: true };
    case 're-encoded': {
      // Same JSON content, other bytes (indentation): a verifier that re-encoded first would pass it.
      const again = Buffer.from(JSON.stringify(JSON.parse(declaration.toString('utf8')), null, 1));
      assert.notDeepEqual(again, declaration);
      return { declaration: again, signature, bytesIntact: false };
    }
    case 'wrong key':
      return { declaration, signature: signDeclaration(declaration, otherKey), bytesIntact: true };
  }
}

const describeTamper = (t: Tamper): string => ('bit' in t ? `${t.kind} ${t.bit}` : t.kind);

type Rig = Readonly<{
  node: string;
  store: EventStore;
  sender: Sender;
  publisher: DeclarationPublisher;
  sim: SimulatedNode;
  key: SigningKey;
  otherKey: SigningKey;
}>;

async function lastSent(rig: Rig): Promise<Recorded<DeclarationSent>> {
  const events = await rig.store.readStream(streamOf(rig.node), { direction: 'backwards' });
  const e = events.find((x) => x.type === 'DeclarationSent');
  if (e === undefined) throw new Error('no DeclarationSent');
  return e as Recorded<DeclarationSent>;
}

/** Send (record) a declaration, publish it — tampered or not — as the relay would, and return the node's answer as stored. */
async function deliver(rig: Rig, i: number, t: Tamper | null) {
  const { digest } = await rig.sender.send(rig.node, [{ id: 'web', image: `web:${i}` }]);
  const sent = await lastSent(rig);
  assert.equal(sent.data.digest, digest);
  const bytes = Buffer.from(sent.data.declaration, 'base64');
  const signature = Buffer.from(sent.data.signature, 'base64');
  const out = t === null ? { declaration: bytes, signature, bytesIntact: true } : tamper(t, bytes, signature, rig.otherKey);
  const reportsBefore = rig.sim.confirmedReports().length;
  const before = foldNodeEvents(rig.node, await rig.store.readStream(streamOf(rig.node)));
  await rig.publisher.publish({
    node: rig.node,
    digest,
    keyId: t?.kind === 'wrong key' ? rig.otherKey.keyId : sent.data.keyId,
    body: encodeSigned(out),
  });
  await until('the node to answer', () => rig.sim.confirmedReports().length > reportsBefore, { timeoutMs: 20_000, everyMs: 10 });
  const answer = rig.sim.confirmedReports()[reportsBefore];
  if (answer === undefined) throw new Error('no answer');
  let stored: Recorded<ReportReceived> | undefined;
  await until(
    `the answer ${answer.messageId} to be stored`,
    async () => {
      const events = await rig.store.readStream(streamOf(rig.node));
      stored = events.find(
        (e): e is Recorded<ReportReceived> => e.type === 'ReportReceived' && e.data.transport.messageId === answer.messageId,
      );
      return stored !== undefined;
    },
    { timeoutMs: 20_000, everyMs: 10 },
  );
  const after = foldNodeEvents(rig.node, await rig.store.readStream(streamOf(rig.node)));
  return {
    digest,
    received: out.declaration,
    bytesIntact: out.bytesIntact,
    answer,
    stored: stored as Recorded<ReportReceived>,
    before,
    after,
  };
}

export const tamperRuns = (): number => Math.max(1, Number(process.env['CONVERGE_FAULT_TAMPER_RUNS'] ?? 40));

export const tampering: Scenario = {
  name: 'tampered declarations',
  faults: `declarations tampered on the way to the node (node.<id>): a bit flipped anywhere in the declaration bytes or the signature (fast-check, ${tamperRuns()} positions), the same JSON re-encoded, a signature by the wrong key`,
  run: (lab) =>
    withNodes(lab, 'tamper', 1, async ([conn]) => {
      if (conn === undefined) throw new Error('no node');
      const seed = faultSeed('tampered declarations');
      const key = generateSigningKey();
      const store = createSqliteEventStore(join(lab.dir, 'tamper.db'));
      const transport = await createAmqpTransport({
        url: lab.engineUrl,
        logger,
        heartbeatSeconds: 2,
        connectionName: 'converge-fault-tamper',
      });
      const ingest = createIngest({ store, source: transport.ingestSource(), logger });
      const publisher = transport.declarationPublisher();
      const sim = createSimulatedNode({ link: conn.link, verifyingKey: key, logger });
      const rig: Rig = {
        node: conn.node,
        store,
        sender: createSender({ store, key }),
        publisher,
        sim,
        key,
        otherKey: generateSigningKey(),
      };
      const byKind = new Map<string, number>();
      let tried = 0;
      let lastPublishAt = 0;
      let recordedRefusals = 0;
      let i = 0;
      try {
        await ingest.start();
        // The node's queue exists once the first declaration is published (the engine declares
        // it, as the relay does), so the node starts consuming alongside, not before.
        const started = sim.start();
        // Control: the same path with nothing tampered is applied and converges, so a refusal
        // below is the tampering's doing, not the rig's.
        const control = await deliver(rig, ++i, null);
        await started;
        assert.equal(control.answer.report.refused, '', 'the untampered declaration was refused');
        assert.equal(control.after.status, 'converged');

        const check = async (t: Tamper): Promise<void> => {
          tried++;
          byKind.set(t.kind, (byKind.get(t.kind) ?? 0) + 1);
          const applied = sim.applied().length;
          const bad = sim.badSignatures();
          lastPublishAt = Date.now();
          const r = await deliver(rig, ++i, t);
          const what = describeTamper(t);
          // The node refused it whole, naming why, about the bytes it received.
          assert.match(r.answer.report.refused, /signature/, `${what}: the node's refusal names the reason`);
          assert.equal(r.answer.report.declared, digestOf(r.received), `${what}: declared = digest of the bytes received`);
          assert.deepEqual(r.answer.report.applied, [], `${what}: nothing applied`);
          assert.equal(sim.applied().length, applied, `${what}: the node applied a tampered declaration`);
          assert.equal(sim.badSignatures(), bad + 1);
          // The engine recorded the refusal as the node stated it.
          assert.equal(r.stored.data.refused, r.answer.report.refused, `${what}: ReportReceived.refused`);
          assert.equal(r.stored.data.declared, r.answer.report.declared, `${what}: ReportReceived.declared`);
          assert.equal(r.stored.data.transport.userId, rig.node);
          recordedRefusals++;
          // And the node's state says what that refusal means.
          const s = r.after;
          if (t.kind === 'declaration bit' || t.kind === 're-encoded') {
            assert.notEqual(r.stored.data.declared, r.digest, `${what}: the digest changed with the bytes`);
            assert.equal(s.reported?.class, 'unknown', `${what}: a refusal about bytes never sent is unknown`);
            assert.equal(s.anomalies.unknown, r.before.anomalies.unknown + 1, `${what}: counted as unknown`);
            assert.equal(s.status, 'behind', `${what}: the node has not read what was sent`);
            assert.equal(s.caughtUp, false);
          } else {
            assert.equal(r.stored.data.declared, r.digest, `${what}: the bytes were intact`);
            assert.equal(s.reported?.class, 'matching');
            assert.equal(s.status, 'refused', `${what}: caught up with the digest sent, and refused it`);
            assert.equal(s.caughtUp, true);
            assert.equal(s.anomalies.unknown, r.before.anomalies.unknown);
          }
        };

        await check({ kind: 're-encoded' });
        await check({ kind: 'wrong key' });
        const details = await fc.check(fc.asyncProperty(tamperArb, check), { numRuns: tamperRuns(), seed, endOnFailure: true });
        const failure = details.failed
          ? `${String((details.errorInstance as Error | null)?.message ?? details.errorInstance).replace(/\s+/g, ' ')} — counterexample ${fc.stringify(details.counterexample)} (seed ${details.seed})`
          : null;
        const recover = Date.now() - lastPublishAt;
        // Figures: every report the node had confirmed (control + refusals) must be stored once.
        const { reports } = await readStored(store);
        const confirmed = sim.confirmedReports();
        let stored = 0;
        let lost = 0;
        let duplicated = 0;
        for (const c of confirmed) {
          const n = reports.get(c.messageId) ?? 0;
          if (n === 0) lost++;
          else stored++;
          if (n > 1) duplicated += n - 1;
        }
        const result: ScenarioResult = {
          scenario: tampering.name,
          faults: tampering.faults,
          sent: confirmed.length,
          confirmed: confirmed.length,
          stored,
          lost,
          duplicated,
          hostileTried: tried,
          // Here "appended" = tampered declarations a node applied (each refusal is a legitimate report).
          hostileAppended: sim.applied().length - 1,
          recoverMs: recover,
          notes: [
            `seed ${seed}; ${[...byKind].map(([k, n]) => `${n}× ${k}`).join(', ')}; every one refused by the node (declared = digest of the bytes received) and recorded`,
            'bytes changed → unknown report, node behind; signature bad → node refused; hostile appended = tampered declarations applied',
            'time to recover = last tampered publish until the refusal was stored',
            ...(failure === null ? [] : [`FAILED: ${failure}`]),
          ],
          checks: { everyTamperedDeclarationRefusedAndRecorded: failure === null && recordedRefusals === tried },
        };
        return result;
      } finally {
        await sim.stop().catch(() => undefined);
        await ingest.stop();
        await publisher.close();
        await transport.close();
        await store.close();
      }
    }),
};
