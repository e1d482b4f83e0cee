import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';

// The README and docs/ point at each other and at the code; a link to a file that moved, or to a
// section that was renamed, sends a newcomer nowhere.

const root = new URL('../..', import.meta.url).pathname;
const pages = [
  'README.md',
  'CONTRIBUTING.md',
  'bench/README.md',
  'test/support/README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');

const anchors = (file: string): Set<string> =>
  new Set(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => /^#{1,6} /.test(l))
      .map((l) => slug(l.replace(/^#+ /, ''))),
  );

test('every relative link in the README and docs/ names a file that exists, and a heading that exists', () => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const href = m[1]!;
      if (/^[a-z]+:/i.test(href)) continue; // http:, https:, mailto:
      const [path, anchor] = href.split('#') as [string, string | undefined];
      const target = path === '' ? join(root, page) : join(dirname(join(root, page)), path);
      if (!existsSync(target)) {
        broken.push(`${page}: ${href} (no ${relative(root, target)})`);
        continue;
      }
      if (anchor !== undefined && statSync(target).isFile() && !anchors(target).has(anchor)) {
        broken.push(`${page}: ${href} (no heading #${anchor} in ${relative(root, target)})`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test('every path of the repository the README and docs/ name in backticks exists', () => {
  const missing: string[] = [];
  for (const page of [...pages, 'RELIABILITY.md']) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const m of text.matchAll(/`((?:src|test|bench|projections|scripts|eslint|bin|docs)\/[^`\s]+)`/g)) {
      const path = m[1]!.replace(/[#:].*$/, '').replace(/\/$/, '');
      if (/[*<]/.test(path)) continue; // a glob or a placeholder: bench/<name>.ts
      // A folder of eslint/layers.js names a file without its extension: src/errors is src/core/errors.ts.
      if (!existsSync(join(root, path)) && !existsSync(join(root, `${path}.ts`))) missing.push(`${page}: ${path}`);
    }
  }
  assert.deepEqual(missing, []);
});
