import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { livenessStates, nodeStatuses, reportClasses, statusOf } from '../../../projections/index.ts';
import type { NodeState } from '../../../projections/index.ts';
import type { Recorded } from '../../../src/core/events/index.ts';
import { createReadModel } from '../../../src/readModel/readModel.ts';
import type { ReadModel } from '../../../src/readModel/readModel.ts';
import { openSnapshot, snapshotFormat, writeSnapshot } from '../../../src/readModel/snapshot/snapshotFile.ts';
import { isoBytesMs } from '../../../src/readModel/snapshot/columnsInPlace.ts';
import { checkConsistency } from '../../../src/readModel/snapshot/trust.ts';

// A restore reads the snapshot's columns in place and builds a node's
// state only when it is first asked for; the counters (fleet tally, liveness) are filled from the
// columns, and the trust checks read the columns too. Whatever the read model, the lazily
// restored one must answer exactly as one restored from the built states: every node, every
// page, the fleet, the liveness counts — and go on folding to the same states.

const dir = mkdtempSync(join(tmpdir(), 'converge-lazyrestore-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let run = 0;

const digests = ['a', 'b', 'c'].map((c) => c.repeat(64));
const t0 = Date.parse('2026-01-01T00:00:00Z');
const at = fc.integer({ min: 0, max: 4_000_000 }).map((ms) => new Date(t0 + ms).toISOString());
const node = fc.constantFrom('n0', 'n1', 'n2', 'n10', 'x1');

type Body = { node: string; type: string; id: string; data: Record<string, unknown> };
const send: fc.Arbitrary<Body> = fc
  .record({
    node,
    digest: fc.constantFrom(...digests),
    sentAt: at,
    serial: fc.integer({ min: 1, max: 9 }),
    resourceIds: fc.constantFrom(['web'], ['web', 'db'], []),
    spec: fc.constantFrom(...digests),
  })
  .map(({ node, spec, ...d }) => ({
    node,
    type: 'DeclarationSent',
    id: `s-${node}-${d.digest[0]}-${d.sentAt}`,
    data: { node, specDigest: spec, declaration: '', signature: '', keyId: 'k', ...d },
  }));
const report: fc.Arbitrary<Body> = fc
  .record({
    node,
    declared: fc.option(fc.constantFrom(...digests), { nil: null }),
    receivedAt: at,
    id: fc.nat({ max: 30 }),
    applied: fc.constantFrom(['web'], ['web', 'db'], []),
    failed: fc.constantFrom({}, { db: 'no disk' }),
    refused: fc.constantFrom('', 'bad signature'),
    carried: fc.constantFrom([], [8080]),
  })
  .map(({ node, id, ...d }) => ({
    node,
    type: 'ReportReceived',
    id: `r${id}`,
    data: { node, transport: { messageId: null, redelivered: false, userId: null }, ...d },
  }));
const alive: fc.Arbitrary<Body> = fc
  .record({ node, seenAt: at })
  .map((d) => ({ node: d.node, type: 'AliveSeen', id: `a-${d.seenAt}`, data: d }));
const history = fc.array(fc.oneof(send, report, alive), { minLength: 1, maxLength: 40 });

const recorded = (bodies: readonly Body[], from = 0): Recorded[] =>
  bodies.map(
    (b, i) =>
      ({
        type: b.type,
        id: `${b.id}-${from + i}`,
        data: b.data,
        stream: `node-${b.node}`,
        revision: BigInt(from + i),
        position: BigInt(from + i + 1),
      }) as Recorded,
  );

/** Everything a caller can ask of a read model, as plain values. */
function answers(m: ReadModel, now: number): unknown {
  const pages = [];
  for (const status of [undefined, ...nodeStatuses])
    for (const liveness of [undefined, ...livenessStates])
      pages.push(m.page({ status, liveness, limit: 2 }, now), m.page({ status, liveness, limit: 50, after: 'n1' }, now));
  for (const spec of digests) pages.push(m.page({ spec, limit: 50 }, now), m.page({ digest: spec, prefix: 'n', limit: 50 }, now));
  const counts = m.liveness(now);
  return {
    size: m.size(),
    position: m.position(),
    fleet: m.fleet(now),
    liveness: nodeStatuses.map((s) => livenessStates.map((l) => counts.get(s, l))),
    pages,
  };
}

test('a read model restored in place answers as one restored from the built states, and folds on the same', async () => {
  await fc.assert(
    fc.asyncProperty(history, history, fc.integer({ min: 0, max: 8_000_000 }), async (before, after, later) => {
      const now = t0 + later;
      const live = createReadModel({ now: () => now, graceMs: 60_000 });
      const events = recorded(before);
      live.apply(events);
      const path = join(dir, `model-${run++}.snapshot`);
      const states = [...live.nodes()];
      await writeSnapshot(path, {
        format: snapshotFormat,
        foldVersion: 1,
        position: live.position()!,
        eventId: events[events.length - 1]!.id,
        writtenAt: new Date(now).toISOString(),
        states,
      });
      const snap = await openSnapshot(path);
      assert.ok(snap !== null);
      checkConsistency(snap);
      const lazy = createReadModel({ now: () => now, graceMs: 60_000 });
      lazy.restore(snap.states, snap.position);
      const eager = createReadModel({ now: () => now, graceMs: 60_000 });
      eager.restore(states, live.position());
      // Counters and pages first, before any node is built by a get.
      assert.deepStrictEqual(answers(lazy, now), answers(eager, now));
      for (const s of states) assert.deepStrictEqual(lazy.get(s.node), s);
      assert.deepStrictEqual([...lazy.nodes()], states);
      // Folding on: the states built lazily are folded as the built ones are.
      const more = recorded(after, events.length);
      lazy.apply(more);
      eager.apply(more);
      assert.deepStrictEqual(answers(lazy, now + 1), answers(eager, now + 1));
      assert.deepStrictEqual([...lazy.nodes()], [...eager.nodes()]);
    }),
    { numRuns: 150 },
  );
});

test('folding onto a node never asked for builds it first: the same state as folding onto the built one', async () => {
  await fc.assert(
    fc.asyncProperty(history, history, async (before, after) => {
      const live = createReadModel({ now: () => t0 });
      const events = recorded(before);
      live.apply(events);
      const path = join(dir, `fold-${run++}.snapshot`);
      await writeSnapshot(path, {
        format: snapshotFormat,
        foldVersion: 1,
        position: live.position()!,
        eventId: 'e',
        writtenAt: 'w',
        states: [...live.nodes()],
      });
      const snap = (await openSnapshot(path))!;
      const lazy = createReadModel({ now: () => t0 });
      lazy.restore(snap.states, snap.position);
      const more = recorded(after, events.length);
      lazy.apply(more);
      live.apply(more);
      for (const s of live.nodes()) assert.deepStrictEqual(lazy.get(s.node), s);
      assert.equal(lazy.size(), live.size());
    }),
    { numRuns: 150 },
  );
});

// ------------------------------------------------------------------ the trust checks, read from the columns

const none: readonly never[] = [];
const sameList = <T>(a: readonly T[], b: readonly T[]): boolean => a === b || (a.length === b.length && a.every((x, i) => x === b[i]));

/** The consistency check as it was, state by state (before it read them from the columns): the reference. */
function referenceCheck(states: readonly NodeState[], position: bigint): string | null {
  for (const s of states) {
    const fail = (what: string): string => `snapshot node ${JSON.stringify(s.node)}: ${what}`;
    const derived = statusOf(s.sent, s.reported);
    if (derived.status !== s.status || derived.caughtUp !== s.caughtUp)
      return fail(`status ${s.status}/caughtUp ${s.caughtUp}, but its send and report give ${derived.status}/${derived.caughtUp}`);
    if (!sameList(derived.missing, s.missing)) return fail('missing resources differ from what its send and report give');
    if (!sameList(s.carried, s.reported?.carried ?? none)) return fail("carried ports differ from its latest report's");
    if (s.position > position) return fail(`position ${s.position} is past the snapshot's ${position}`);
    if (s.reported === null ? s.reports !== 0 : s.reports === 0)
      return fail(`${s.reports} reports folded, but report ${s.reported === null ? 'absent' : 'present'}`);
  }
  return null;
}

const lists = fc.constantFrom(['web'], ['web', 'db'], ['db'], []);
const ports = fc.constantFrom([8080], [], [8080, 9090]);
/** States that may contradict themselves anywhere the check looks (a forger's), sharing or not sharing lists as a fold would. */
const forged = fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), { minLength: 1, maxLength: 8 }).chain((nodes) =>
  fc.tuple(
    ...nodes.map((n) =>
      fc
        .record({
          sent: fc.option(fc.record({ digest: fc.constantFrom(...digests), resourceIds: lists })),
          reported: fc.option(
            fc.record({
              declared: fc.option(fc.constantFrom(...digests)),
              applied: lists,
              failed: fc.constantFrom({}, { db: 'no disk' }, { cache: 'x' }),
              refused: fc.constantFrom('', '', '', 'no'),
              carried: ports,
              class: fc.constantFrom(...reportClasses),
            }),
          ),
          sameApplied: fc.boolean(),
          // Most reports name the send (then the lists and failures decide the status).
          namesSend: fc.nat({ max: 3 }),
          // Mostly honest: a snapshot whose first node lies says nothing of the others.
          honest: fc.nat({ max: 7 }).map((k) => k > 0),
          status: fc.constantFrom(...nodeStatuses),
          caughtUp: fc.boolean(),
          missing: lists,
          carried: ports,
          reports: fc.nat({ max: 3 }),
          position: fc.bigInt({ min: 0n, max: 12n }),
        })
        .map((r): NodeState => {
          const sent = r.sent === null ? null : { ...r.sent, specDigest: digests[0]!, serial: 1, sentAt: 't', acknowledgedAt: null };
          const reported =
            r.reported === null
              ? null
              : {
                  ...r.reported,
                  declared: r.namesSend > 0 && sent !== null ? sent.digest : r.reported.declared,
                  receivedAt: 't',
                  applied: r.sameApplied && sent !== null ? sent.resourceIds : r.reported.applied,
                };
          const d = statusOf(sent, reported);
          return {
            node: n,
            status: r.honest ? d.status : r.status,
            caughtUp: r.honest ? d.caughtUp : r.caughtUp,
            sent,
            reported,
            missing: r.honest ? d.missing : r.missing,
            carried: r.honest ? (reported?.carried ?? []) : r.carried,
            lastSeenAt: null,
            retiredAt: null,
            anomalies: { stale: 0, unknown: 0, undeclared: 0 },
            convergence: { lastLatencyMs: null, recentLatenciesMs: [], acknowledged: 0, superseded: 0 },
            earlierSends: [],
            reports: r.honest ? (reported === null ? 0 : Math.max(1, r.reports)) : r.reports,
            lastReportId: null,
            position: r.position,
            revision: 0n,
          };
        }),
    ),
  ),
);

test('the consistency check read from the columns refuses exactly what the state-by-state check refused, naming the same node and fault', async () => {
  await fc.assert(
    fc.asyncProperty(forged, fc.bigInt({ min: 0n, max: 12n }), async (states, position) => {
      const path = join(dir, `forged-${run++}.snapshot`);
      await writeSnapshot(path, { format: snapshotFormat, foldVersion: 1, position, eventId: 'e', writtenAt: 'w', states });
      const snap = (await openSnapshot(path))!;
      let message: string | null = null;
      try {
        checkConsistency(snap);
      } catch (e) {
        message = (e as Error).message;
      }
      assert.equal(message, referenceCheck(states, position));
    }),
    { numRuns: 400 },
  );
});

// ------------------------------------------------------------------ times read from bytes

test('isoBytesMs reads a time from its bytes as Date.parse reads the text, or leaves it to Date.parse', () => {
  const parse = (t: string): number | null => isoBytesMs(Buffer.from(t, 'latin1'), 0, t.length);
  fc.assert(
    fc.property(fc.date({ noInvalidDate: true }), (d) => {
      const t = d.toISOString();
      const ms = parse(t);
      if (ms !== null) assert.equal(ms, Date.parse(t));
      // The common case is read from the bytes: a year from 100 to 9999, a day up to the 28th.
      if (d.getUTCFullYear() >= 100 && d.getUTCFullYear() <= 9999 && d.getUTCDate() <= 28) assert.notEqual(ms, null);
    }),
    { numRuns: 2_000 },
  );
  // Near-misses: any character of a time changed to another digit or symbol.
  fc.assert(
    fc.property(
      fc.date({ min: new Date('0100-01-01Z'), max: new Date('9999-12-31Z'), noInvalidDate: true }),
      fc.nat({ max: 23 }),
      fc.constantFrom(...'0123456789-:.TZ +/a'),
      (d, i, c) => {
        const t = d.toISOString();
        const bent = t.slice(0, i) + c + t.slice(i + 1);
        const ms = parse(bent);
        if (ms !== null) assert.equal(ms, Date.parse(bent), bent);
      },
    ),
    { numRuns: 3_000 },
  );
  for (const t of ['', '2026-01-01', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00.000+00:00', '0099-01-01T00:00:00.000Z'])
    if (parse(t) !== null) assert.equal(parse(t), Date.parse(t));
});
