import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { cliIn } from '../support/cliInProcess.ts';

// A settings file (docs/operations.md "Configuration"): flags > variables > file > defaults, a key
// that is no setting refused, and `converge config view` naming each value's source with secrets masked.

const dir = mkdtempSync(join(tmpdir(), 'converge-configfile-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Row = { setting: string; value: string | null; source: string };
const view = async (args: string[], env: Record<string, string> = {}): Promise<Map<string, Row>> => {
  const r = await cliIn(dir, ['config', 'view', '-o', 'json', ...args], env);
  assert.equal(r.code, 0, r.stderr);
  return new Map(
    r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Row)
      .map((row) => [row.setting, row]),
  );
};

test('config view: flags over variables over the file over defaults; tokens and passwords masked', async () => {
  writeFileSync(
    join(dir, 'converge.yaml'),
    [
      '# an operator’s file',
      'grace-ms: 30000',
      'port: 9000',
      'amqp: amqp://engine:hunter2@broker:5672/fleet',
      'api-tokens: "s3cr3tvalue1234567890:read,other-tok-abcdef0123456:send"',
      'log-level: debug',
    ].join('\n'),
  );
  const rows = await view(['--config', 'converge.yaml', '--port', '7000'], { CONVERGE_GRACE_MS: '45000' });
  assert.deepEqual(rows.get('port'), { setting: 'port', env: 'CONVERGE_PORT', value: '7000', source: 'flag' });
  assert.equal(rows.get('grace-ms')?.value, '45000');
  assert.equal(rows.get('grace-ms')?.source, 'env');
  assert.equal(rows.get('log-level')?.source, 'file');
  assert.equal(rows.get('store')?.source, 'default');
  const text = JSON.stringify([...rows.values()]);
  assert.ok(!text.includes('hunter2') && !text.includes('s3cr3tvalue'), 'no secret is shown');
  assert.match(rows.get('api-tokens')?.value ?? '', /2 token\(s\), hidden/);
  assert.match(rows.get('amqp')?.value ?? '', /engine:\*\*\*@broker/);
});

test('a command reads the file through CONVERGE_CONFIG; a key that is no setting or a bad value is refused with its name', async () => {
  writeFileSync(join(dir, 'typo.yaml'), 'grace-ms: 30000\ngrace_ms: 1\n');
  const typo = await cliIn(dir, ['status'], { CONVERGE_CONFIG: 'typo.yaml' });
  assert.equal(typo.code, 2);
  assert.match(typo.stderr, /typo\.yaml: "grace_ms" is not a setting/);
  writeFileSync(join(dir, 'bad.yaml'), 'store: "bogus:thing"\n');
  const bad = await cliIn(dir, ['status', '--config', 'bad.yaml']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--store \/ CONVERGE_STORE: .*bogus:thing/);
  const missing = await cliIn(dir, ['status', '--config', 'nope.yaml']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /--config nope\.yaml: cannot be read/);
});
