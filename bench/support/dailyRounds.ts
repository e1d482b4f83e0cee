// A fleet's daily rounds written into a new SQLite store through the engine's own code (the event
// constructors, the liveness recorder, the store's append in calls of 2,000 writes): per node per
// day heard (NodeHeard), sent a declaration, its report 30 minutes later, then silent (NodeSilent)
// until the next day. bench/warmStartWidth.ts builds its stores with it.
import { generateSigningKey, specDigestOf } from '../../src/core/declaration/index.ts';
import {
  makeDeclarationSent,
  makeObservationStarted,
  makeObservationStopped,
  makeReportReceived,
  observationStream,
  streamOf,
} from '../../src/core/events/index.ts';
import { encodeReport } from '../../src/core/wire/index.ts';
import { createLivenessRecorder } from '../../src/engine/liveness/recorder.ts';
import type { NewEvent, StreamWrite } from '../../src/store/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';

export const roundsGraceMs = 60_000;
const dayMs = 86_400_000;
const hourMs = 3_600_000;
const day0 = Date.parse('2026-01-01T00:00:00Z');

/**
 * `roundCount` days of the fleet into a new SQLite store, one event type at a time so positions
 * follow event times, as the engine's appends do. Returns the events written.
 */
export async function buildDailyRounds(path: string, nodes: readonly string[], roundCount: number): Promise<number> {
  // NORMAL: how often the WAL is synced changes nothing the warm start reads, only the build's time.
  const store = createSqliteEventStore(path, { synchronous: 'NORMAL' });
  const rec = createLivenessRecorder({ graceMs: roundsGraceMs });
  const key = generateSigningKey();
  const specs = Array.from({ length: 10 }, (_, i) => [{ id: 'web', image: `registry.example/web:1.${i}`, ports: [8080] }, { id: 'db' }]);
  // Ten specs, their digests computed once as a bulk send does: signing each declaration is most of the build's time.
  const specDigests = specs.map((r) => specDigestOf(r));
  let written = 0;
  const append = async (events: readonly NewEvent[]): Promise<void> => {
    for (let i = 0; i < events.length; i += 2_000) {
      const writes: StreamWrite[] = events
        .slice(i, i + 2_000)
        .map((e) => ({ stream: streamOf((e.data as { node: string }).node), expected: 'any', events: [e] }));
      await store.append(writes);
    }
    written += events.length;
  };
  await store.append([
    { stream: observationStream, expected: 'any', events: [makeObservationStarted('bench', day0, roundsGraceMs, null)] },
  ]);
  const digests: string[] = [];
  for (let d = 0; d < roundCount; d++) {
    const t = day0 + d * dayMs;
    // 08:00: every node heard again (the recorder makes a NodeHeard for a node it holds silent).
    const heard: NewEvent[] = [];
    for (const [i, node] of nodes.entries()) {
      const at = t + 8 * hourMs + i;
      const e = rec.heard(node, at, at);
      if (e !== null) heard.push(e);
    }
    await append(heard);
    await append(
      nodes.map((node, i) => {
        const k = (i + d) % specs.length;
        const e = makeDeclarationSent({
          node,
          serial: d + 1,
          resources: specs[k]!,
          specDigest: specDigests[k]!,
          key,
          now: new Date(t + 9 * hourMs + i),
        });
        digests[i] = e.data.digest;
        return e;
      }),
    );
    await append(
      nodes.map((node, i) => {
        const at = t + 9.5 * hourMs + i;
        // A report is a sign of life too, as ingest hears it; the node is held heard, so nothing is recorded.
        rec.heard(node, at, at);
        const report = { node, applied: ['web', 'db'], failed: {}, refused: '', carried: [8080], declared: digests[i]! };
        return makeReportReceived(report, encodeReport(report), { messageId: `r-${d}-${i}`, redelivered: false, userId: node }, at);
      }),
    );
    // 12:00: the sweep finds every node silent past the grace (one outage a day, over by the next morning).
    await append(rec.silences(t + 12 * hourMs, t + 12 * hourMs));
  }
  await store.append([
    { stream: observationStream, expected: 'any', events: [makeObservationStopped('bench', day0 + roundCount * dayMs, 'stopped')] },
  ]);
  await store.close();
  return written + 2;
}
