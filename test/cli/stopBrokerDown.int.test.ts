import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createScratchVhost, describeOnBroker } from '../support/broker.ts';
import type { ScratchVhost } from '../support/broker.ts';
import { createFaultProxy } from '../support/faults/faultProxy.ts';
import type { FaultProxy } from '../support/faults/faultProxy.ts';
import { startServe } from '../support/serveProcess.ts';
import type { ServeProcess } from '../support/serveProcess.ts';
import { until } from '../support/until.ts';

// SIGTERM to `serve` while its broker is down (docs/operations.md#shutting-down): it must exit, not
// keep reconnecting. The engine's bound is --stop-timeout-ms (10 s here); the test fails only on a
// hang (still alive after 60 s) and prints the time it took, as information.

describeOnBroker('serve stopping while the broker is down', () => {
  let scratch: ScratchVhost;
  let proxy: FaultProxy;
  let dir: string;
  let serve: ServeProcess | null = null;
  before(async () => {
    scratch = await createScratchVhost('converge-int-stop');
    const base = new URL(scratch.amqpUrl);
    proxy = await createFaultProxy({ target: { host: base.hostname, port: Number(base.port || 5672) } });
    dir = mkdtempSync(join(tmpdir(), 'converge-stop-'));
  });
  after(async () => {
    await serve?.kill();
    await proxy?.close();
    await scratch?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test('SIGTERM with the broker gone exits with code 0 within the stop timeout, not after its reconnects', async () => {
    const s = startServe(['serve'], {
      CONVERGE_STORE: `sqlite:${join(dir, 'events.db')}`,
      CONVERGE_AMQP_URL: proxy.rewrite(scratch.amqpUrl),
      CONVERGE_MANAGEMENT_URL: scratch.managementUrl,
      CONVERGE_PORT: '0',
      CONVERGE_LOG_LEVEL: 'info',
      CONVERGE_STOP_TIMEOUT_MS: '10000',
    });
    serve = s;
    await s.url;
    await until('the engine ingesting', () => s.logged(/engine listening/));
    // The broker goes away: open connections are reset and new ones refused, as when it is down.
    proxy.refuse(true);
    proxy.reset();
    await until('the engine noticing', () => s.logged(/amqp connection lost/));
    const sent = Date.now();
    s.child.kill('SIGTERM');
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    void s.exited.then((e) => (exit = e));
    await until('serve to exit after SIGTERM (a hang if not within 60 s)', () => exit, 60_000).catch((err: Error) => {
      const last = s
        .lines()
        .filter((l) => !/amqp connect failed/.test(l.msg))
        .slice(-20)
        .map((l) => l.raw.slice(0, 400));
      throw new Error(`${err.message}; its last log lines (reconnect attempts left out):\n${last.join('\n')}`);
    });
    console.log(`# serve exited ${Date.now() - sent} ms after SIGTERM with the broker down (bound: --stop-timeout-ms 10000)`);
    assert.deepEqual(exit, { code: 0, signal: null }, s.stderr().slice(-3000));
  });
});
