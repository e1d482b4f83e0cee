import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';

// On SQLite a second `converge serve` on the same file would run a second relay (an
// SQLite store has no relay lease), publishing every declaration twice. It is refused at start
// with CONVERGE_ERR_STORE_IN_USE naming the holder; the lock is the kernel's, so it dies with a
// SIGKILLed holder and the next serve starts. Read commands still open the file meanwhile.

const bin = new URL('../../bin/converge.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'converge-serve-lock-'));
const running: ServeProcess[] = [];
after(async () => {
  for (const s of running) await s.kill();
  rmSync(dir, { recursive: true, force: true });
});

const serve = (store: string): ServeProcess => {
  const s = startServe(['serve', '--port', '0', '--store', store, '--log-level', 'warn']);
  running.push(s);
  return s;
};

test(
  'a second serve on the same SQLite file exits 1 with CONVERGE_ERR_STORE_IN_USE; after the first is SIGKILLed a new one starts',
  { timeout: 90_000 },
  async () => {
    const store = `sqlite:${join(dir, 'data', 'events.db')}`;
    const first = serve(store);
    await first.url;

    const second = serve(store);
    const outcome = await Promise.race([second.exited, second.url.then(() => 'listening' as const)]);
    assert.notEqual(outcome, 'listening', 'the second serve started on a file another serve holds');
    const { code } = await second.exited;
    assert.equal(code, 1, second.stderr());
    assert.match(second.stderr(), /CONVERGE_ERR_STORE_IN_USE/);
    assert.match(second.stderr(), new RegExp(`pid ${first.child.pid}\\b`), 'the message names the holder');
    assert.match(second.stderr(), /PostgreSQL/, 'and says what to do for several engines');
    await assert.rejects(second.url, /before listening/);

    // A read command is no engine: it opens the file while serve holds it.
    const status = await promisify(execFile)(process.execPath, [bin, 'status', '--store', store, '--json']);
    assert.doesNotMatch(status.stderr, /in use/);

    await first.kill();
    const third = serve(store);
    await third.url;
    assert.equal(await third.stop(), 0, third.stderr());
  },
);

test('serves on two different SQLite files run side by side', { timeout: 60_000 }, async () => {
  const a = serve(`sqlite:${join(dir, 'a.db')}`);
  const b = serve(`sqlite:${join(dir, 'b.db')}`);
  await Promise.all([a.url, b.url]);
  assert.equal(await a.stop(), 0, a.stderr());
  assert.equal(await b.stop(), 0, b.stderr());
});
