import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { streamOf } from '../../src/core/events/index.ts';
import type { DeclarationSent, Recorded } from '../../src/core/events/index.ts';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';

// A moment on the command line (--at, --from/--to, --as-of) is read one way (projections/node/
// forensics.ts readAt): all digits a position, at most 2^64-1; else an ISO 8601 time with its zone,
// on a date that exists. `send --as-of` reads and refuses as `rollout start --as-of` does: a send
// is a write, so a misread moment must send nothing.

const dir = mkdtempSync(join(tmpdir(), 'converge-moments-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const path = join(dir, 'store.db');
const env = { CONVERGE_STORE: `sqlite:${path}`, CONVERGE_SIGNING_KEY: join(dir, 'key.pem') };
const cli = (args: readonly string[]) => cliIn(dir, args, env);

async function sends(): Promise<Recorded<DeclarationSent>[]> {
  const store = createSqliteEventStore(path);
  try {
    return (await store.readStream(streamOf('n1'))).filter((e) => e.type === 'DeclarationSent') as Recorded<DeclarationSent>[];
  } finally {
    await store.close();
  }
}

before(async () => {
  const key = await cliIn(dir, ['keygen', '--out', 'key.pem', '--json']);
  assert.equal(key.code, 0, key.stderr);
  const store = createSqliteEventStore(path);
  const h = historyInStore(store);
  for (let i = 0; i < 12; i++) await h.alive('n0');
  const a = await h.send('n1', [{ id: 'web', image: 'nginx:1.26' }]);
  h.tick(60_000);
  await h.report('n1', { declared: a.digest, applied: ['web'] });
  h.tick(60_000);
  await h.send('n1', [{ id: 'web', image: 'nginx:1.27' }]);
  await store.close();
});

test('send --as-of: all digits are a position; past the head, a time to come or a time without a zone is a usage error and sends nothing', async () => {
  const [first] = await sends();
  const byPosition = await cli(['send', 'n1', '--as-of', first!.position.toString(), '--json']);
  assert.equal(byPosition.code, 0, byPosition.stderr);
  assert.equal(JSON.parse(byPosition.stdout).restored.serial, 1, 'the send stored at that position, not a date in 2001');
  const count = (await sends()).length;
  for (const [asOf, why] of [
    ['100000', /position to restore \(asOf\) 100000 is past the store's head/],
    ['2030-01-01T00:00:00Z', /2030-01-01T00:00:00.000Z is a time to come/],
    ['2026-11-29T14:00:00', /has no zone: add Z for UTC or an offset/],
    ['2026-02-30', /not a date and time that exist/],
  ] as const) {
    const r = await cli(['send', 'n1', '--as-of', asOf]);
    assert.equal(r.code, 2, `${asOf}: ${r.stderr}`);
    assert.match(r.stderr, why);
  }
  assert.equal((await sends()).length, count, 'nothing was sent');
  const rollout = await cli(['rollout', 'start', '--as-of', '2026-11-29T14:00:00', '--nodes', 'n1', '--wave-timeout', '1m']);
  assert.equal(rollout.code, 2, rollout.stderr);
  assert.match(rollout.stderr, /has no zone/);
});

test('state --at refuses a time without a zone, an impossible date, a position past 64 bits and non-ISO text; it prints the instant it used', async () => {
  for (const [at, why] of [
    ['2026-11-29T14:01:00', /--at "2026-11-29T14:01:00" has no zone: add Z for UTC or an offset, like 2026-11-29T14:01:00Z/],
    ['2026-02-30', /not a date and time that exist/],
    ['99999999999999999999', /past the largest store position \(18446744073709551615\)/],
    ['2026-11-29 10:00 PM', /neither an ISO 8601 time nor a decimal position/],
  ] as const) {
    const r = await cli(['state', 'n1', '--at', at]);
    assert.equal(r.code, 2, `${at}: ${r.stderr}`);
    assert.match(r.stderr, why);
  }
  const r = await cli(['state', 'n1', '--at', '2026-11-29T15:01:30+01:00']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^as of 2026-11-29T15:01:30\+01:00 \(2026-11-29T14:01:30\.000Z\) /);
});

test('history --from after --to, and audit export with such a window, are usage errors naming both ends', async () => {
  const h = await cli(['history', 'n1', '--from', '100', '--to', '50']);
  assert.equal(h.code, 2, h.stderr);
  assert.match(h.stderr, /--from "100" is after --to "50"/);
  const later = '2026-11-30T00:00:00Z';
  const earlier = '2026-11-29T00:00:00Z';
  const ht = await cli(['history', 'n1', '--from', later, '--to', earlier]);
  assert.equal(ht.code, 2, ht.stderr);
  assert.match(ht.stderr, /--from "2026-11-30T00:00:00Z" is after --to "2026-11-29T00:00:00Z"/);
  const e = await cli(['audit', 'export', 'n1', '--from', later, '--to', earlier, '--out', 'e.json', '--unsigned']);
  assert.equal(e.code, 2, e.stderr);
  assert.match(e.stderr, /--from "2026-11-30T00:00:00Z" is after --to "2026-11-29T00:00:00Z"/);
});
