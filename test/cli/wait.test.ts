import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { apiHarness, readToken } from '../support/apiHarness.ts';
import type { ApiHarness } from '../support/apiHarness.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { until } from '../support/until.ts';

// `converge wait` (docs/cli.md#converge-wait) against the HTTP API listening on a real socket, over
// a memory store and a live projection runner (test/support/apiHarness.ts), run in this process.

let h: ApiHarness;
let server: string;
const wait = (args: readonly string[]) => cliIn(tmpdir(), ['wait', ...args], { CONVERGE_SERVER: server, CONVERGE_TOKEN: readToken });

/** Resolves once the API holds `n` awaits open: the wait has read its digest and is waiting. */
const awaitsHeld = (n: number) =>
  until(`${n} await(s) held`, async () => {
    const g = await h.metrics.httpOpen.get();
    return g.values.some((v) => v.labels.kind === 'await' && v.value >= n);
  });

describe('converge wait', () => {
  before(async () => {
    h = await apiHarness();
    server = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => h.close());

  test('exits 0 once the node reports the latest send converged', async () => {
    const a = await h.history.send('n1');
    await h.settle();
    const waiting = wait(['n1', '--timeout', '2m']);
    await awaitsHeld(1);
    h.history.tick();
    await h.history.report('n1', { declared: a.digest, applied: ['web'] });
    const r = await waiting;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `node n1 converged with ${a.digest.slice(0, 12)} (serial 1)\n`);
  });

  test('waits on the digest it read at the start: a newer send converging does not end it', async () => {
    const a = await h.history.send('n2');
    await h.settle();
    const waiting = wait(['n2', '--timeout', '5s', '--json']);
    await awaitsHeld(1);
    h.history.tick();
    const b = await h.history.send('n2');
    h.history.tick();
    // The report of the first send lands after the second (the race), then the second converges.
    await h.history.report('n2', { declared: a.digest, applied: ['web'] });
    await h.history.report('n2', { declared: b.digest, applied: ['web'] });
    const r = await waiting;
    assert.equal(r.code, 3, r.stderr);
    const out = JSON.parse(r.stdout) as { digest: string; outcome: string; state: { sent: { digest: string } } };
    assert.equal(out.digest, a.digest);
    assert.equal(out.outcome, 'timeout');
    assert.equal(out.state.sent.digest, b.digest);
    assert.match(r.stderr, /^converge: node n2 did not reach \w{12} within 5000 ms; superseded by serial 2/);
  });

  test('a stale report of an earlier digest never ends a wait on the latest', async () => {
    const a = await h.history.send('n3');
    h.history.tick();
    const b = await h.history.send('n3');
    h.history.tick();
    await h.history.report('n3', { declared: a.digest, applied: ['web'] });
    await h.settle();
    const r = await wait(['n3', '--digest', b.digest, '--timeout', '1s']);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /did not reach .* StaleReport: reported serial 1 at .*, sent serial 2 at /);
  });

  test('degraded and refused are exit 4 for --for converged; --for caught-up is met by either', async () => {
    const a = await h.history.send('n4', [{ id: 'web' }, { id: 'db' }]);
    h.history.tick();
    await h.history.report('n4', { declared: a.digest, applied: ['web'], failed: { db: 'disk full' } });
    const b = await h.history.send('n5');
    h.history.tick();
    await h.history.report('n5', { declared: b.digest, refused: 'signature does not verify' });
    await h.settle();
    const degraded = await wait(['n4']);
    assert.equal(degraded.code, 4, degraded.stderr);
    assert.match(degraded.stderr, /^converge: node n4 is degraded on \w{12}: ResourcesFailed: serial 1: db: disk full\n$/);
    const refused = await wait(['n5', '--json']);
    assert.equal(refused.code, 4, refused.stderr);
    assert.equal((JSON.parse(refused.stdout) as { outcome: string }).outcome, 'refused');
    const caughtUp = await wait(['n4', '--for', 'caught-up']);
    assert.equal(caughtUp.code, 0, caughtUp.stderr);
    assert.match(caughtUp.stdout, /^node n4 caught up with/);
  });

  test('exit 5 for a node the API does not know, or one sent nothing', async () => {
    await h.history.alive('n6');
    await h.settle();
    const ghost = await wait(['ghost']);
    assert.equal(ghost.code, 5, ghost.stderr);
    assert.equal(ghost.stderr, 'converge: node ghost is not known to the API\n');
    const ghostDigest = await wait(['ghost', '--digest', 'a'.repeat(64)]);
    assert.equal(ghostDigest.code, 5, ghostDigest.stderr);
    const nothing = await wait(['n6']);
    assert.equal(nothing.code, 5, nothing.stderr);
    assert.equal(nothing.stderr, 'converge: node n6 has been sent nothing to wait for\n');
  });

  test('usage mistakes exit 2 before asking the server; a server it cannot reach or that refuses the token, 1', async () => {
    for (const args of [['n1', '--for', 'ready'], ['n1', '--digest', 'xyz'], ['n1', '--timeout', 'soon'], []]) {
      const r = await wait(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    }
    const away = await cliIn(tmpdir(), ['wait', 'n1', '--server', 'http://127.0.0.1:1']);
    assert.equal(away.code, 1, away.stderr);
    assert.match(away.stderr, /cannot reach http:\/\/127\.0\.0\.1:1/);
    const badToken = await cliIn(tmpdir(), ['wait', 'n1', '--server', server, '--token', 'nope']);
    assert.equal(badToken.code, 1, badToken.stderr);
    assert.match(badToken.stderr, /401/);
    assert.doesNotMatch(badToken.stderr, /nope/);
  });

  test('--help and the command table know it', async () => {
    const help = await cliIn(tmpdir(), ['--help']);
    assert.match(help.stdout, /^\s+wait\s+wait on a running server/m);
    const own = await cliIn(tmpdir(), ['wait', '--help']);
    assert.match(own.stdout, /--for converged\|caught-up/);
    assert.match(own.stdout, /--server <url>.*CONVERGE_SERVER/);
    const bash = await cliIn(tmpdir(), ['completion', 'bash']);
    assert.match(bash.stdout, /\bwait\b/);
  });
});
