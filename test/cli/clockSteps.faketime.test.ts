import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { generateSigningKey, signingKeyToPem } from '../../src/core/declaration/index.ts';
import { startServe } from '../support/serveProcess.ts';
import { until } from '../support/until.ts';

// `converge serve` under libfaketime with the monotonic clock left real: its wall clock is stepped
// forward 3 minutes and back 13 while a rollout's wave (150 s timeout) waits on nodes that never
// report. The wave must not time out: the driver measures its wait on the monotonic clock.

const lib = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

test(
  'a wall clock stepped forward and back under serve times no wave out early',
  { skip: existsSync(lib) ? false : `no ${lib} (apt-get install faketime)`, timeout: 120_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'converge-clock-'));
    const clockFile = join(dir, 'faketime');
    writeFileSync(clockFile, '+0\n');
    const keyPath = join(dir, 'signing.pem');
    writeFileSync(keyPath, signingKeyToPem(generateSigningKey()), { mode: 0o600 });
    const token = 'clock-steps-token-0123456789abcdef';
    const serve = startServe(['serve', '--port', '0'], {
      CONVERGE_STORE: `sqlite:${join(dir, 'store.sqlite')}`,
      CONVERGE_SIGNING_KEY: keyPath,
      CONVERGE_API_TOKENS: `${token}:read,send`,
      LD_PRELOAD: lib,
      FAKETIME_TIMESTAMP_FILE: clockFile,
      FAKETIME_NO_CACHE: '1',
      DONT_FAKE_MONOTONIC: '1',
    });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    try {
      const url = await serve.url;
      /** How far ahead of ours the child's wall clock is (ms), from its Date header (to the second). */
      const skew = async (): Promise<number> => Date.parse((await fetch(`${url}/healthz`)).headers.get('date')!) - Date.now();
      const rollout = async (): Promise<{ status: string; waves?: { deadline: string | null }[] }> =>
        (await (await fetch(`${url}/v1/rollouts/steps`, { headers })).json()) as { status: string; waves?: { deadline: string | null }[] };
      let serial = 0;
      /** A declaration to a node outside the rollout: it wakes the driver, and is folded once the read model answers it. */
      const nudge = async (): Promise<void> => {
        const r = await fetch(`${url}/v1/nodes/bystander/declarations`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ resources: [{ id: 'web', image: `b:${++serial}` }] }),
        });
        assert.equal(r.status, 202);
        const { digest } = (await r.json()) as { digest: string };
        await until('the read model to fold the nudge', async () => {
          const s = (await (await fetch(`${url}/v1/nodes/bystander`, { headers })).json()) as { sent?: { digest?: string } };
          return s.sent?.digest === digest;
        });
      };
      const started = await fetch(`${url}/v1/rollouts`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          rollout: 'steps',
          resources: [{ id: 'web', image: 'nginx:1.27' }],
          selection: { kind: 'nodes', nodes: ['quiet-1', 'quiet-2'] },
          waves: '100%',
          maxFailures: '0',
          waveTimeoutMs: 150_000,
        }),
      });
      assert.equal(started.status, 202, await started.text());
      await until('the wave to be sent', async () => (await rollout()).waves?.[0]?.deadline != null);
      const deadline = (await rollout()).waves![0]!.deadline;

      writeFileSync(clockFile, '+180\n');
      await until('the child to see the forward step', async () => (await skew()) > 170_000);
      await nudge();
      await nudge();
      assert.equal((await rollout()).status, 'running', 'three minutes forward on the wall clock did not time the wave out');

      writeFileSync(clockFile, '-600\n');
      await until('the child to see the backward step', async () => (await skew()) < -590_000);
      await nudge();
      await nudge();
      assert.equal((await rollout()).status, 'running');
      assert.equal((await rollout()).waves![0]!.deadline, deadline, 'the recorded deadline is what the record says');
      t.diagnostic('cannot be verified here in a test of bounded length: that the wave times out 150 s of monotonic time after its send');
    } finally {
      await serve.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
