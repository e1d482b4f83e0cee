import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { rawPublicKey, signingKeyFromPem } from '../../src/core/declaration/index.ts';
import { cliIn } from '../support/cliInProcess.ts';
import type { CliResult } from '../support/cliInProcess.ts';

// What a newcomer tripped on from a fresh clone, one test each (in-process; the spawned ones are
// in newcomerSpawned.test.ts).

let dir: string;

const cli = (args: readonly string[], env: Record<string, string> = {}, cwd = dir): Promise<CliResult> => cliIn(cwd, args, env);

describe('what a newcomer tripped on', () => {
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'converge-newcomer-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('--api-tokens names one separator, ";", and serve refuses entries separated by spaces', async () => {
    const help = await cli(['serve', '--help']);
    assert.match(help.stdout, /--api-tokens <list> .*separated by ;/);
    assert.doesNotMatch(help.stdout, /separated by spaces/);
    const r = await cli(['serve', '--store', 'memory:', '--api-tokens', 'alpha-token:read,send beta-token:read']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--api-tokens \/ CONVERGE_API_TOKENS: entry 1: its token holds a space.*separate entries with ;/);
    assert.doesNotMatch(r.stderr, /alpha-token|beta-token/, 'a token is a secret: the message does not echo it');
  });

  test('serve --help lists each setting once', async () => {
    const help = await cli(['serve', '--help']);
    const flagLines = help.stdout.split('\n').filter((l) => /^\s+(-\w, )?--[a-z]/.test(l));
    const names = flagLines.map((l) => /--([a-z-]+)/.exec(l)![1]!);
    assert.deepEqual(
      names.filter((n, i) => names.indexOf(n) !== i),
      [],
    );
    for (const flag of ['grace-ms', 'trust-missing-user-id']) assert.equal(names.filter((n) => n === flag).length, 1, flag);
  });

  test('send and rollout start into a SQLite store that does not exist fail naming it, and create nothing', async () => {
    assert.equal((await cli(['keygen', '--out', 'key.pem'])).code, 0);
    writeFileSync(join(dir, 'spec.json'), JSON.stringify({ resources: [{ id: 'web' }] }));
    const typo = join(dir, 'convrege.db');
    const env = { CONVERGE_STORE: `sqlite:${typo}`, CONVERGE_SIGNING_KEY: join(dir, 'key.pem') };
    for (const args of [
      ['send', 'n1', 'spec.json'],
      ['rollout', 'start', 'spec.json', '--nodes', 'n1,n2', '--wave-timeout', '10m'],
    ]) {
      const r = await cli(args, env);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, new RegExp(`^converge: store ${typo} does not exist`));
      assert.equal(r.stderr.trim().split('\n').length, 1);
      assert.ok(!existsSync(typo), `${args[0]} created the store`);
    }
  });

  test('keygen prints the public key as the 64 hex digits a node verifies with, beside the PEM', async () => {
    const r = await cli(['keygen', '--out', 'hex.pem']);
    assert.equal(r.code, 0, r.stderr);
    const hex = rawPublicKey(signingKeyFromPem(readFileSync(join(dir, 'hex.pem'))).publicKey).toString('hex');
    assert.match(r.stdout, new RegExp(`^public key \\(hex\\) ${hex}$`, 'm'));
    assert.match(r.stdout, /BEGIN PUBLIC KEY/);
    const j = await cli(['keygen', '--json']);
    assert.match(JSON.parse(j.stdout).publicKeyHex, /^[0-9a-f]{64}$/);
    const bare = await cli(['keygen']);
    assert.match(bare.stderr, /^public key \(hex\) [0-9a-f]{64}$/m, 'without --out it goes to stderr with the key id');
    assert.doesNotMatch(bare.stdout, /public key \(hex\)/, 'stdout stays the private key alone');
  });

  test('demo --help names the store and the defaults the demo runs with, not the ones of serve', async () => {
    const help = (await cli(['demo', '--help'])).stdout;
    const line = (flag: string): string => help.split('\n').find((l) => l.includes(`--${flag} `)) ?? '';
    assert.doesNotMatch(line('store'), /converge\.db/);
    assert.match(line('store'), /default a new SQLite file in a temporary folder/);
    assert.match(line('grace-ms'), /default the longer of 3000 and --interval-ms/);
    assert.match(line('log-level'), /default warn/);
  });
});
