import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFleetFold, findRaces, parseAt, readAt, stateAt, timeline } from '../../../projections/index.ts';
import { history } from '../../support/history.ts';

test("the seed's race — A's report landing after B was sent — shows up in races with both digests", () => {
  const h = history('n1');
  const a = h.send([{ id: 'web', image: 'a' }]);
  h.tick();
  const b = h.send([{ id: 'web', image: 'b' }]);
  h.tick();
  const stale = h.report({ declared: a.data.digest, applied: ['web'] });
  h.tick();
  h.report({ declared: b.data.digest, applied: ['web'] });
  const races = findRaces(h.events);
  assert.equal(races.length, 1);
  const r = races[0]!;
  assert.equal(r.node, 'n1');
  assert.equal(r.reportDigest, a.data.digest);
  assert.equal(r.reportSerial, 1);
  assert.equal(r.currentDigest, b.data.digest);
  assert.equal(r.currentSerial, 2);
  assert.equal(r.class, 'stale');
  assert.equal(r.position, stale.position);
  assert.equal(r.receivedAt, stale.data.receivedAt);
  assert.equal(r.sentAt, b.data.sentAt);
});

test('a matching report is no race, and a report before any send is not one either', () => {
  const h = history('n2');
  h.report({ declared: null });
  const a = h.send();
  h.tick();
  h.report({ declared: a.data.digest, applied: ['web'] });
  assert.deepEqual(findRaces(h.events), []);
});

test('legacy and unknown reports after a send are races the clock rule would have missed', () => {
  const h = history('n3');
  h.send();
  h.tick();
  h.report({ declared: null });
  h.report({ declared: 'e'.repeat(64) });
  assert.deepEqual(
    findRaces(h.events).map((r) => r.class),
    ['undeclared', 'unknown'],
  );
});

test("state at a time between A's stale report and B's report says behind; after B, converged", () => {
  const h = history('n4');
  const a = h.send();
  h.tick();
  const b = h.send();
  h.tick();
  h.report({ declared: a.data.digest, applied: ['web'] });
  const between = h.tick(500);
  h.tick(500);
  h.report({ declared: b.data.digest, applied: ['web'] });
  const at = parseAt(between.toISOString())!;
  assert.equal(stateAt('n4', h.events, at).state.status, 'behind');
  assert.equal(stateAt('n4', h.events, parseAt(h.tick().toISOString())!).state.status, 'converged');
});

test('parseAt reads positions and ISO times and refuses anything else', () => {
  assert.deepEqual(parseAt('42'), { kind: 'position', position: 42n });
  assert.equal(parseAt('2026-11-29T14:00:00Z')?.kind, 'time');
  assert.equal(parseAt('yesterday'), null);
  assert.equal(parseAt('2026-13-45'), null);
});

test('parseAt refuses a time without a zone, a date that does not exist, a position past 64 bits and non-ISO text', () => {
  // Read in the process's own zone, a zone-less time answered differently on a CLI and a server elsewhere.
  assert.equal(parseAt('2026-12-05T15:12:03'), null);
  assert.equal(parseAt('2026-12-05T15:12'), null);
  assert.match((readAt('2026-12-05T15:12:03') as { problem: string }).problem, /no zone: add Z .*2026-12-05T15:12:03Z/);
  assert.equal(parseAt('2026-02-30'), null, 'not 2026-03-02');
  assert.equal(parseAt('2026-02-29T00:00:00Z'), null);
  assert.equal(parseAt('2026-12-05T24:00:00Z'), null);
  assert.equal(parseAt('2026-12-05 10:00 PM'), null);
  assert.equal(parseAt('2026-12-05T10:00:00 +01:00'), null);
  assert.equal(parseAt('99999999999999999999'), null);
  assert.match((readAt('99999999999999999999') as { problem: string }).problem, /past the largest store position \(18446744073709551615\)/);
  assert.deepEqual(parseAt('18446744073709551615'), { kind: 'position', position: 2n ** 64n - 1n });
  assert.deepEqual(parseAt('20261205'), { kind: 'position', position: 20261205n }, 'all digits are a position');
  assert.deepEqual(parseAt('2028-02-29'), { kind: 'time', time: Date.UTC(2028, 1, 29), iso: '2028-02-29T00:00:00.000Z' });
  assert.deepEqual(parseAt('2026-12-05T15:12:03+01:00'), {
    kind: 'time',
    time: Date.UTC(2026, 11, 5, 14, 12, 3),
    iso: '2026-12-05T14:12:03.000Z',
  });
  assert.deepEqual(parseAt('2026-12-05T15:12:03.5Z'), {
    kind: 'time',
    time: Date.UTC(2026, 11, 5, 15, 12, 3, 500),
    iso: '2026-12-05T15:12:03.500Z',
  });
});

test('the timeline classifies each report and gives each declaration its latency or its fate', () => {
  const h = history('n5');
  const a = h.send();
  h.tick(1000);
  const b = h.send();
  h.tick(2000);
  h.report({ declared: a.data.digest });
  h.tick(3000);
  h.report({ declared: b.data.digest, applied: ['web'] });
  h.report({ declared: null });
  const t = timeline('n5', h.events);
  assert.deepEqual(
    t.entries.map((e) => e.class),
    [null, null, 'stale', 'matching', 'undeclared'],
  );
  assert.deepEqual(
    t.declarations.map((d) => d.outcome),
    ['superseded', 'acknowledged'],
  );
  assert.equal(t.declarations[1]?.latencyMs, 5000);
});

test('the fleet fold as of a position stops each node there', () => {
  const h = history('n6');
  const a = h.send();
  h.report({ declared: a.data.digest, applied: ['web'] });
  const fleet = createFleetFold({ kind: 'position', position: a.position });
  for (const e of h.events) fleet.push(e);
  assert.equal(fleet.states().get('n6')?.status, 'behind');
});

test('state at a time after the clock stepped back: the last event stamped at or before it counts, whatever came before', () => {
  // 01:00 send, 01:10 a later event (the clock ran ahead), then the clock stepped back 13 minutes:
  // a report stamped 00:58 and one stamped 01:08 (both after the 01:10 event in position order).
  const h = history('n-step');
  h.tick(60_000);
  const a = h.send();
  h.tick(10 * 60_000);
  h.report({ declared: null });
  h.tick(-13 * 60_000);
  h.report({ declared: null });
  h.tick(10 * 60_000);
  const last = h.report({ declared: a.data.digest, applied: ['web'] });
  const at = (ms: number) => parseAt(new Date(Date.parse(last.data.receivedAt) + ms).toISOString())!;
  // A minute after the 01:08 report: every event counts, though the 01:10 one is stamped later.
  const r = stateAt('n-step', h.events, at(60_000));
  assert.equal(r.folded, h.events.length);
  assert.equal(r.state.status, 'converged');
  const fleet = createFleetFold(at(60_000));
  for (const e of h.events) fleet.push(e);
  assert.deepEqual(fleet.states().get('n-step'), r.state);
  // Just before the 01:08 report: the last event at or before then is the 00:58 report (the third event).
  const before = stateAt('n-step', h.events, at(-1));
  assert.equal(before.folded, 3);
  assert.equal(before.state.status, 'behind');
  const fleetBefore = createFleetFold(at(-1));
  for (const e of h.events) fleetBefore.push(e);
  assert.deepEqual(fleetBefore.states().get('n-step'), before.state);
});
