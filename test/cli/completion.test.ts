import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cliIn } from '../support/cliInProcess.ts';

// `converge completion bash`, run by bash itself: the script is sourced in `bash -c`, COMP_WORDS and
// COMP_CWORD are set as bash sets them for a command line, and the completion function is called.

let script: string;
let dir: string;

/** COMPREPLY for the command line `words`, the last word being the one completed. */
function complete(words: readonly string[]): string[] {
  const program = `source completion.bash\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')})\nCOMP_CWORD=${words.length - 1}\n_converge\nprintf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = spawnSync('bash', ['-c', program], { encoding: 'utf8', cwd: dir });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  return r.stdout.split('\n').filter((l) => l !== '');
}

describe('converge completion bash', () => {
  before(async () => {
    const r = await cliIn(tmpdir(), ['completion', 'bash']);
    assert.equal(r.code, 0, r.stderr);
    script = r.stdout;
    dir = mkdtempSync(join(tmpdir(), 'converge-completion-'));
    writeFileSync(join(dir, 'completion.bash'), script);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('commands', () => {
    assert.deepEqual(complete(['converge', 'st']), ['status', 'state', 'store']);
    assert.deepEqual(complete(['converge', 'rollo']), ['rollout', 'rollouts']);
    assert.deepEqual(complete(['converge', '--vers']), ['--version']);
  });

  test('subcommands, after the command and after flags with values', () => {
    assert.deepEqual(complete(['converge', 'rollout', 'st']), ['start', 'status']);
    assert.deepEqual(complete(['converge', '--store', 'sqlite:x.db', 'rollout', 'st']), ['start', 'status']);
    assert.deepEqual(complete(['converge', 'completion', '']), ['bash', 'zsh', 'fish']);
    assert.deepEqual(complete(['converge', 'node', 'e']), ['enroll']);
  });

  test('flags and the values of -o', () => {
    assert.deepEqual(complete(['converge', 'status', '--o']), ['--output']);
    assert.deepEqual(complete(['converge', 'status', '-o', 'y']), ['yaml']);
    assert.deepEqual(complete(['converge', 'rollout', 'start', '--wave']), ['--waves', '--wave-timeout']);
    // A command completes the configuration flags it uses, not every one.
    assert.deepEqual(complete(['converge', 'status', '--gr']), ['--grace-ms']);
    assert.deepEqual(complete(['converge', 'keygen', '--st']), []);
    // send takes --json but not -o.
    assert.deepEqual(complete(['converge', 'send', '--out']), []);
  });

  test('zsh and fish scripts come from the same table; another shell is a usage mistake', async () => {
    const zsh = await cliIn(tmpdir(), ['completion', 'zsh']);
    assert.match(zsh.stdout, /^#compdef converge\n[\s\S]*bashcompinit[\s\S]*complete -o default -F _converge converge/);
    const fish = await cliIn(tmpdir(), ['completion', 'fish']);
    assert.match(
      fish.stdout,
      /-n '__fish_seen_subcommand_from rollout; and not __fish_seen_subcommand_from start status pause resume abort rollback explain' -a 'start status pause resume abort rollback explain'/,
    );
    assert.match(fish.stdout, /-n '__fish_seen_subcommand_from status' -l output -s o -x -a 'json yaml wide name'/);
    const bad = await cliIn(tmpdir(), ['completion', 'tcsh']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /completion takes bash, zsh or fish/);
    process.stdout.write('# zsh and fish are not installed here: their scripts are checked as text, not run\n');
  });
});
