import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { nodes, rounds, writeHistory, writeSignedStore } from '../support/auditHistory.ts';

// `converge audit export` and `audit check` as an auditor runs them (bin/converge.js, after npm
// run build): export from a SQLite store with signed checkpoints, check with no store at all (the
// --store given to check names a file that does not exist), a forged copy, the wrong key,
// something that is not a bundle, and a moment no checkpoint covers.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'converge-evidence-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const converge = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { cwd: dir, encoding: 'utf8' });
const check = (...args: string[]) => converge('audit', 'check', ...args, '--store', 'sqlite:nowhere/none.db');

const audit = generateKeyPairSync('ed25519');
writeFileSync(join(dir, 'audit.pub'), audit.publicKey.export({ format: 'pem', type: 'spki' }));
writeFileSync(join(dir, 'other.pub'), generateKeyPairSync('ed25519').publicKey.export({ format: 'pem', type: 'spki' }));
const path = join(dir, 'store.db');
await (await writeSignedStore(path, audit.privateKey)).close();
const at = '2026-01-01T00:01:00.000Z';

test('export writes the bundle; check verifies it offline with the audit key, and names the key it used', () => {
  const e = converge(
    'audit',
    'export',
    'web-003',
    '--at',
    at,
    '--out',
    'b.json',
    '--store',
    `sqlite:${path}`,
    '--audit-pub',
    'audit.pub',
    '--json',
  );
  assert.equal(e.status, 0, e.stderr);
  const summary = JSON.parse(e.stdout);
  assert.equal(summary.signed, true);
  assert.equal(summary.checkpoint.size, 1 + 2 * nodes * 3 + 1);
  assert.equal(summary.latest.size, 1 + rounds * nodes * 3 + rounds - 1);

  const ok = check('b.json', '--audit-pub', 'audit.pub');
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  // The text export counts the node's events and the observation spans' apart, as check does.
  const text = converge(
    'audit',
    'export',
    'web-003',
    '--at',
    at,
    '--out',
    't.json',
    '--store',
    `sqlite:${path}`,
    '--audit-pub',
    'audit.pub',
  );
  const counted = /(\d+) events of web-003 and (\d+) of the observation spans/.exec(text.stdout);
  const checked = /(\d+) events of the node and (\d+) of the observation spans/.exec(ok.stdout);
  assert.ok(counted !== null && checked !== null, text.stdout + ok.stdout);
  assert.deepEqual(counted.slice(1), checked.slice(1));
  assert.match(ok.stdout, /^verified: web-003 as of 2026-01-01T00:01:00\.000Z: 6 events of the node/m);
  assert.match(ok.stdout, /^key: the audit key given \(--audit-pub\)/m);
  assert.match(ok.stdout, /^answer \(the fold again\): converged, caught up; sent [0-9a-f]{12} \(serial 2\)/m);
  const own = check('b.json');
  assert.equal(own.status, 0);
  assert.match(own.stdout, /the bundle's own audit key, id [0-9a-f]{16}; a bundle's own key proves nothing alone/);
  const json = check('b.json', '--audit-pub', 'audit.pub', '--json');
  assert.equal(JSON.parse(json.stdout).verified, true);
});

test('check: a forged event is exit 1 with its position and kind; the wrong key 1; not a bundle 2', () => {
  const b = JSON.parse(readFileSync(join(dir, 'b.json'), 'utf8'));
  const e = b.events.find((x: { type: string }) => x.type === 'ReportReceived');
  const data = JSON.parse(Buffer.from(e.data, 'base64').toString('utf8'));
  e.data = Buffer.from(JSON.stringify({ ...data, declared: 'f'.repeat(64) })).toString('base64');
  writeFileSync(join(dir, 'forged.json'), JSON.stringify(b));
  const forged = check('forged.json', '--audit-pub', 'audit.pub');
  assert.equal(forged.status, 1, forged.stdout + forged.stderr);
  assert.match(forged.stdout, new RegExp(`^FORGED at position ${e.position} \\(inclusion\\)`, 'm'));
  const wrongKey = check('b.json', '--audit-pub', 'other.pub', '--json');
  assert.equal(wrongKey.status, 1);
  assert.equal(JSON.parse(wrongKey.stdout).finding.kind, 'key');
  // The text names the key it refused, and does not say the bundle has no signed checkpoint: it has one.
  const wrongKeyText = check('b.json', '--audit-pub', 'other.pub');
  assert.match(wrongKeyText.stdout, /^FORGED \(key\)/m);
  assert.doesNotMatch(wrongKeyText.stdout, /no signed checkpoint in the bundle/);
  assert.match(wrongKeyText.stdout, /^key: the audit key given \(--audit-pub\) is not the bundle's: nothing was verified with it/m);
  // A bundle an earlier release wrote with a zone-less --at: its moment cannot be read now (which
  // zone?), so the answer is not recomputed: not checked (2), not forged.
  writeFileSync(
    join(dir, 'nozone.json'),
    JSON.stringify({ ...JSON.parse(readFileSync(join(dir, 'b.json'), 'utf8')), at: '2026-01-01T00:01:00' }),
  );
  const noZone = check('nozone.json', '--audit-pub', 'audit.pub');
  assert.equal(noZone.status, 2, noZone.stdout + noZone.stderr);
  assert.match(noZone.stdout, /^NOT CHECKED \(moment\): .*no zone/m);
  writeFileSync(join(dir, 'not.json'), '{"format":"something else"}');
  assert.equal(check('not.json').status, 2);
  assert.equal(check('missing.json').status, 2);
});

test('--at checkpoint: the last event the newest checkpoint covers, the same bundle as --at that position', () => {
  const base = ['audit', 'export', 'web-003', '--store', `sqlite:${path}`, '--audit-pub', 'audit.pub', '--json'];
  const byCheckpoint = converge(...base, '--at', 'checkpoint', '--out', 'cp.json');
  assert.equal(byCheckpoint.status, 0, byCheckpoint.stderr);
  const bundle = JSON.parse(readFileSync(join(dir, 'cp.json'), 'utf8'));
  assert.equal(bundle.signed, true);
  assert.equal(bundle.tree.size, bundle.latest.checkpoint.size, 'proven against the newest checkpoint');
  assert.match(bundle.at, /^[0-9]+$/, 'the moment is made a position');
  const byPosition = converge(...base, '--at', bundle.at, '--out', 'pos.json');
  assert.equal(byPosition.status, 0, byPosition.stderr);
  const same = JSON.parse(readFileSync(join(dir, 'pos.json'), 'utf8'));
  assert.deepEqual(
    { ...bundle, exportedAt: null },
    { ...same, exportedAt: null },
    'the same events, proofs and answer as asking for that position',
  );
  assert.equal(check('cp.json', '--audit-pub', 'audit.pub').status, 0);
});

test('a moment no checkpoint covers: export refuses unless --unsigned; check accepts that only with --unsigned', async () => {
  const store = createSqliteEventStore(path);
  await writeHistory(store, nodes, rounds);
  await store.close();
  const later = `2026-01-01T00:0${rounds}:00.000Z`;
  const args = ['audit', 'export', 'web-003', '--at', later, '--store', `sqlite:${path}`, '--audit-pub', 'audit.pub', '--out', 'u.json'];
  const refused = converge(...args);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /no signed checkpoint covers web-003's 15 events .*--unsigned/);
  assert.equal(converge(...args, '--unsigned').status, 0);
  const strict = check('u.json', '--audit-pub', 'audit.pub');
  assert.equal(strict.status, 1);
  assert.match(strict.stdout, /^NOT ACCEPTED \(unsigned\): the proofs are against a head nobody signed/m);
  const accepted = check('u.json', '--audit-pub', 'audit.pub', '--unsigned');
  assert.equal(accepted.status, 0, accepted.stdout);
  assert.match(accepted.stdout, /^UNSIGNED: that tree is the store's head at export/m);
});
