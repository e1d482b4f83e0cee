import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSqliteEventStore } from '../../src/store/sqlite/sqliteEventStore.ts';
import { cliIn } from '../support/cliInProcess.ts';
import type { CliResult } from '../support/cliInProcess.ts';
import { historyInStore } from '../support/history.ts';
import { tempDir } from '../support/tempDir.ts';
import { until } from '../support/until.ts';

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;

const cli = (args: readonly string[], env: Record<string, string> = {}, stdin = ''): Promise<CliResult> => cliIn(dir, args, env, stdin);

const jsonLines = (text: string): unknown[] =>
  text
    .trim()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as unknown);

let dir: string;
let env: Record<string, string>;
let digests: { a: string; b: string };

describe("converge CLI on a store with the seed's race", () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'converge-cli-'));
    const key = await cli(['keygen', '--out', 'key.pem', '--json']);
    assert.equal(key.code, 0, key.stderr);
    env = { CONVERGE_STORE: `sqlite:${join(dir, 'store.db')}`, CONVERGE_SIGNING_KEY: join(dir, 'key.pem') };
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const script = historyInStore(store);
    const a = await script.send('n1');
    script.tick();
    const b = await script.send('n1');
    script.tick();
    await script.report('n1', { declared: a.digest, applied: ['web'] });
    script.tick();
    await script.report('n1', { declared: b.digest, applied: ['web'] });
    await script.alive('n2');
    await store.close();
    digests = { a: a.digest, b: b.digest };
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  test('keygen --json gives a key id and a public key', async () => {
    const r = await cli(['keygen', '--json']);
    const out = JSON.parse(r.stdout);
    assert.match(out.keyId, /^[0-9a-f]{16}$/);
    assert.match(out.publicKeyPem, /BEGIN PUBLIC KEY/);
  });

  test('send prints the digest; --json gives digest and serial; - reads stdin', async () => {
    writeFileSync(join(dir, 'spec.json'), JSON.stringify({ resources: [{ id: 'web' }] }));
    const r = await cli(['send', 'n3', 'spec.json'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^[0-9a-f]{64}\n$/);
    const j = await cli(['send', 'n3', '-', '--json'], env, JSON.stringify({ resources: [{ id: 'web', v: 2 }] }));
    const out = JSON.parse(j.stdout);
    assert.equal(out.serial, 2);
    assert.match(out.digest, /^[0-9a-f]{64}$/);
  });

  test('send --as-of sends again the spec the node had been sent then; a spec and --as-of together is a usage error', async () => {
    const a = JSON.parse((await cli(['send', 'n3', '-', '--json'], env, JSON.stringify({ resources: [{ id: 'web', v: 1 }] }))).stdout);
    const between = new Date().toISOString();
    await until('the clock to pass the first send', async () => Date.now() > Date.parse(between));
    await cli(['send', 'n3', '-'], env, JSON.stringify({ resources: [{ id: 'web', v: 2 }] }));
    const r = await cli(['send', 'n3', '--as-of', between, '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.serial, a.serial + 2);
    assert.equal(out.restored.serial, a.serial);
    assert.equal(out.digest === a.digest, false, 'a new serial signs new bytes');
    const both = await cli(['send', 'n3', 'spec.json', '--as-of', between], env);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /exactly one/);
  });

  test('send with an invalid spec exits 1 with one line and a code-backed reason', async () => {
    const r = await cli(['send', 'n3', '-'], env, JSON.stringify({ resources: [{ id: 'a' }, { id: 'a' }] }));
    assert.equal(r.code, 1);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.match(r.stderr, /appears more than once/);
  });

  test('status --json is one JSON line per node; status <node> --json is one object', async () => {
    const r = await cli(['status', '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    const nodes = jsonLines(r.stdout) as { node: string; status: string }[];
    assert.deepEqual(
      nodes.map((n) => n.node),
      ['n1', 'n2', 'n3'],
    );
    assert.equal(nodes[0]?.status, 'converged');
    const one = JSON.parse((await cli(['status', 'n1', '--json'], env)).stdout);
    assert.equal(one.caughtUp, true);
    const table = (await cli(['status'], env)).stdout;
    assert.match(table, /^NODE\s+STATUS/);
  });

  test('status of an unknown node exits 1 with one line', async () => {
    const r = await cli(['status', 'ghost'], env);
    assert.equal(r.code, 1);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  });

  test('history --json lists each event with its report class', async () => {
    const r = await cli(['history', 'n1', '--json'], env);
    const entries = jsonLines(r.stdout) as { type: string; class: string | null }[];
    assert.deepEqual(
      entries.map((e) => e.class),
      [null, null, 'stale', 'matching'],
    );
  });

  test("state --at a time between A's stale report and B's report says behind", async () => {
    const h = jsonLines((await cli(['history', 'n1', '--json'], env)).stdout) as { at: string }[];
    const between = new Date((Date.parse(h[2]!.at) + Date.parse(h[3]!.at)) / 2).toISOString();
    const r = await cli(['state', 'n1', '--at', between, '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.state.status, 'behind');
    assert.equal(out.state.anomalies.stale, 1);
  });

  test('forensics races --json lists the stale report with the right digests', async () => {
    const r = await cli(['forensics', 'races', '--json'], env);
    const races = jsonLines(r.stdout) as { node: string; reportDigest: string; currentDigest: string; class: string }[];
    assert.equal(races.length, 1);
    assert.equal(races[0]?.node, 'n1');
    assert.equal(races[0]?.reportDigest, digests.a);
    assert.equal(races[0]?.currentDigest, digests.b);
    assert.equal(races[0]?.class, 'stale');
  });

  test('replay --verify --json finds no difference on an honest store', async () => {
    const r = await cli(['replay', '--verify', '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    const lines = jsonLines(r.stdout) as { verified?: boolean }[];
    assert.equal(lines.at(-1)?.verified, true);
  });

  test('replay --verify against a tampered snapshot prints the difference and exits non-zero', async () => {
    const { createProjectionRunner } = await import('../../src/readModel/projectionRunner.ts');
    const { logger } = await import('../support/logger.ts');
    const snapPath = join(dir, 'tampered.snapshot.json');
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const runner = createProjectionRunner({ store, logger, snapshot: { path: snapPath, everyEvents: 1_000_000 } });
    await runner.start();
    await runner.caughtUp();
    const n1 = runner.readModel.get('n1')!;
    runner.readModel.set({ ...n1, status: 'behind' });
    await runner.writeSnapshot();
    await runner.stop();
    await store.close();
    const r = await cli(['replay', '--verify', '--snapshot', snapPath], env);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /n1\s+status: replay="converged" live="behind"/);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  });

  test('replay --verify against a snapshot of another store or another fold says so, instead of reporting the model wrong', async () => {
    // Found: the replay was compared with whatever the file held: another store's snapshot gave
    // "replay disagrees … in 4 field(s)" (exit 1), as did a snapshot an older engine's fold wrote.
    const { createProjectionRunner } = await import('../../src/readModel/projectionRunner.ts');
    const { readSnapshot, writeSnapshot } = await import('../../src/readModel/snapshot/snapshotFile.ts');
    const { logger } = await import('../support/logger.ts');
    const snapPath = join(dir, 'honest.snapshot');
    const store = createSqliteEventStore(join(dir, 'store.db'));
    const runner = createProjectionRunner({ store, logger, snapshot: { path: snapPath, everyEvents: 1_000_000 } });
    await runner.start();
    await runner.caughtUp();
    await runner.writeSnapshot();
    await runner.stop();
    await store.close();
    const snap = (await readSnapshot(snapPath))!;

    const otherPath = join(dir, 'other-store.snapshot');
    await writeSnapshot(otherPath, { ...snap, eventId: '00000000-0000-5000-8000-000000000000' });
    const other = await cli(['replay', '--verify', '--snapshot', otherPath], env);
    assert.equal(other.code, 1);
    assert.doesNotMatch(other.stderr, /disagrees/);
    assert.match(other.stderr, /another store/);
    assert.match(other.stderr, /--snapshot|remove/);

    const oldFoldPath = join(dir, 'old-fold.snapshot');
    await writeSnapshot(oldFoldPath, { ...snap, foldVersion: snap.foldVersion - 1 });
    const oldFold = await cli(['replay', '--verify', '--snapshot', oldFoldPath], env);
    assert.equal(oldFold.code, 1);
    assert.doesNotMatch(oldFold.stderr, /disagrees/);
    assert.match(oldFold.stderr, new RegExp(`fold ${snap.foldVersion - 1}`));
    assert.equal(oldFold.stderr.trim().split('\n').length, 1);

    // A snapshot of a format this engine does not read (an engine before format 4 wrote it) says what to do too.
    const format3Path = join(dir, 'format3.snapshot');
    writeFileSync(format3Path, '{"format":3,"foldVersion":3,"states":[]}');
    const format3 = await cli(['replay', '--verify', '--snapshot', format3Path], env);
    assert.equal(format3.code, 1);
    assert.match(format3.stderr, /format 3.*remove it/);
    assert.equal(format3.stderr.trim().split('\n').length, 1);

    const honest = await cli(['replay', '--verify', '--snapshot', snapPath], env);
    assert.equal(honest.code, 0, honest.stderr);
  });

  test('every command has --help', async () => {
    for (const c of ['serve', 'demo', 'keygen', 'send', 'status', 'history', 'state', 'forensics', 'replay', 'node']) {
      const r = await cli([c, '--help']);
      assert.equal(r.code, 0);
      assert.match(r.stdout, /^usage: converge /);
    }
  });

  test('a bad flag exits non-zero with one line', async () => {
    const r = await cli(['status', '--bogus'], env);
    assert.notEqual(r.code, 0);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.match(r.stderr, /bogus/);
  });

  test('configuration mistakes are reported one line each, all at once, as a usage mistake', async () => {
    const r = await cli(['serve'], { CONVERGE_PORT: 'eighty', CONVERGE_STORE: 'mysql://x', CONVERGE_API_TOKENS: 'short:read' });
    assert.equal(r.code, 2);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 3);
    assert.ok(lines.some((l) => l.includes('CONVERGE_PORT')));
    assert.ok(lines.some((l) => l.includes('CONVERGE_STORE')));
    assert.ok(lines.some((l) => l.includes('CONVERGE_API_TOKENS')));
  });

  test('status with a --status or --liveness that no node can have is a usage mistake, not an empty list', async () => {
    for (const args of [
      ['status', '--status', 'bogus'],
      ['status', '--liveness', 'asleep'],
    ]) {
      const r = await cli(args, env);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}`);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1);
    }
    const ok = await cli(['status', '--status', 'converged', '--liveness', 'never-seen', '--json'], env);
    assert.equal(ok.code, 0, ok.stderr);
  });

  test('history --limit takes a whole number of at least 1 and shows that many of the latest events', async () => {
    for (const bad of ['0', '-2', '1.5', 'x']) {
      const r = await cli(['history', 'n1', `--limit=${bad}`, '--json'], env);
      assert.equal(r.code, 2, `--limit=${bad}: ${r.stdout}`);
      assert.equal(r.stderr.trim().split('\n').length, 1);
    }
    const two = jsonLines((await cli(['history', 'n1', '--limit', '2', '--json'], env)).stdout) as { class: string | null }[];
    assert.deepEqual(
      two.map((e) => e.class),
      ['stale', 'matching'],
    );
  });

  test('send of a spec that is not JSON gives the whole reason on one line', async () => {
    const r = await cli(['send', 'n3', '-'], env, 'nope\n');
    assert.equal(r.code, 1);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /stdin is not JSON: .*nope.* is not valid JSON/);
  });

  test('replay --verify against a named snapshot that does not exist fails instead of verifying something else', async () => {
    const r = await cli(['replay', '--verify', '--snapshot', join(dir, 'missing.snapshot.json')], env);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /missing\.snapshot\.json/);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  });

  test('a read command on a store that does not exist says so instead of creating one', async () => {
    const r = await cli(['status'], { CONVERGE_STORE: `sqlite:${join(dir, 'nope.db')}` });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not exist/);
  });
});

describe('the converge binary', () => {
  test('bin/converge.js runs the compiled CLI; a bad flag exits non-zero with one line', () => {
    const r = spawnSync(process.execPath, [bin, 'status', '--nope'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    const help = spawnSync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /forensics/);
  });

  test('replay --verify, built, folds the replay on a worker thread beside the live path and finds no difference', async () => {
    const d = mkdtempSync(join(tmpdir(), 'converge-cli-replay-'));
    try {
      const store = createSqliteEventStore(join(d, 'store.db'));
      const script = historyInStore(store);
      for (const node of ['n1', 'n2', 'n3']) {
        const a = await script.send(node);
        script.tick();
        await script.report(node, { declared: a.digest, applied: ['web'] });
        await script.alive(node);
      }
      await store.close();
      const r = spawnSync(process.execPath, [bin, 'replay', '--verify', '--json', '--store', `sqlite:${join(d, 'store.db')}`], {
        encoding: 'utf8',
        cwd: d,
        timeout: 60_000,
      });
      assert.equal(r.status, 0, r.stderr);
      const last = jsonLines(r.stdout).at(-1) as { verified: boolean; nodes: number; differences: number };
      assert.deepEqual([last.verified, last.nodes, last.differences], [true, 3, 0]);
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });

  test('demo runs a small fleet to completion, reproduces the race and reports JSON', (t) => {
    const r = spawnSync(process.execPath, [bin, 'demo', '--nodes', '8', '--rounds', '3', '--interval-ms', '300', '--port', '0', '--json'], {
      // The demo keeps its store in a fresh dir under the OS temp dir, for the user to read afterwards: here, the test's.
      env: { ...process.env, TMPDIR: tempDir(t, 'converge-cli-demo-') },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const lines = jsonLines(r.stdout) as { final?: boolean; races: number; refused: number; degraded: number; round: number }[];
    const final = lines.find((l) => l.final === true);
    assert.ok(final, 'a final summary line');
    assert.equal(final.round, 3);
    assert.ok(final.races > 0, 'the slow nodes reproduce the race');
    assert.equal(final.refused, 1);
    assert.equal(final.degraded, 1);
  });
});
