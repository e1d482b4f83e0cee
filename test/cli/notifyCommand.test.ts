import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { verifySignature, signatureHeader, timestampHeader } from '../../src/notify/index.ts';
import { cliIn } from '../support/cliInProcess.ts';
import { startReceiver } from '../notify/receiver.ts';

// `converge notify list|test` (docs/operations.md "Notifications"): the file's destinations with
// secrets by source only, and a signed test message to a receiver the test runs.

const dir = mkdtempSync(join(tmpdir(), 'converge-notifycli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('notify list shows each destination, its secret by source and never its value; notify test delivers a signed message', async () => {
  const receiver = await startReceiver();
  try {
    writeFileSync(
      join(dir, 'notify.json'),
      JSON.stringify({
        destinations: [
          { name: 'hook', kind: 'webhook', url: receiver.url, secret: { env: 'HOOK_SECRET' }, filter: { minSeverity: 'critical' } },
          { name: 'down', kind: 'webhook', url: 'http://127.0.0.1:9/nowhere', timeoutMs: 1000 },
        ],
      }),
    );
    const env = { HOOK_SECRET: 's3cret-value', CONVERGE_NOTIFY_CONFIG: 'notify.json' };
    const list = await cliIn(dir, ['notify', 'list', '-o', 'json'], env);
    assert.equal(list.code, 0, list.stderr);
    assert.ok(!list.stdout.includes('s3cret-value'), 'the secret is never printed');
    const rows = list.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { name: string; secret: string; minSeverity: string });
    assert.deepEqual(
      rows.map((r) => [r.name, r.secret, r.minSeverity]),
      [
        ['hook', 'env HOOK_SECRET', 'critical'],
        ['down', 'none', 'info'],
      ],
    );

    const sent = await cliIn(dir, ['notify', 'test', 'hook', '--json'], env);
    assert.equal(sent.code, 0, sent.stderr);
    assert.equal(receiver.received.length, 1, 'sent whatever the filter says');
    const got = receiver.received[0]!;
    assert.equal((JSON.parse(got.body) as { type: string }).type, 'io.converge.notify.test');
    assert.ok(
      verifySignature(
        's3cret-value',
        { signature: got.headers[signatureHeader] as string | undefined, timestamp: got.headers[timestampHeader] as string | undefined },
        got.body,
        Math.floor(Date.now() / 1000),
      ),
      'signed with the destination secret',
    );

    const failed = await cliIn(dir, ['notify', 'test', 'down'], env);
    assert.equal(failed.code, 1);
    assert.match(failed.stdout, /down: not delivered/);
    const unknown = await cliIn(dir, ['notify', 'test', 'nope'], env);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no destination "nope".*hook, down/);
  } finally {
    await receiver.close();
  }
});
