import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

// Code and docs explain themselves from inside the repository: a reader has docs/ and the code,
// not a tracker's numbered issues or a design brief that lives elsewhere. A contract is linked as
// docs/design.md (or another page of docs/), the story of a change goes in its commit message.

const root = new URL('../..', import.meta.url).pathname;
const tracked = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => /\.(ts|tsx|mjs|js|md|json|ya?ml|sh)$/.test(f) && !f.endsWith('package-lock.json'))
  .filter((f) => !f.startsWith('test/fixtures/'));

// Built from parts so that this file does not match itself.
const outside: readonly [RegExp, string][] = [
  [new RegExp(`\\b${'iss'}ue #?\\d+`, 'i'), 'a numbered issue of a tracker'],
  [new RegExp(`\\b${'STY'}LE(\\.md| §)`), 'a style guide outside the repository'],
  [new RegExp(`\\b${'DES'}IGN( §|\\.md)`), 'the original brief outside the repository (say docs/design.md)'],
  [new RegExp(`\\.\\./${'sha'}red/`), 'a folder beside the repository'],
  [new RegExp(`\\b(${'TE'}AM|${'DEVELO'}PERS)\\.md\\b`), 'a team document outside the repository'],
];

test('no file of the repository refers to a tracker issue or a file outside the repository', () => {
  const found: string[] = [];
  for (const file of tracked) {
    let text: string;
    try {
      text = readFileSync(join(root, file), 'utf8');
    } catch {
      continue; // listed by git but removed in the work tree
    }
    text.split('\n').forEach((line, i) => {
      for (const [re, what] of outside) if (re.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
    });
  }
  assert.deepEqual(found, [], `${found.length} references leave the repository:\n${found.slice(0, 40).join('\n')}`);
});
