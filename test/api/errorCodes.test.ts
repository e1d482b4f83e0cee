import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { errorCodes } from '../../src/core/errors.ts';

// (fastify): every error has a stable code in one registry, and each is documented.
test('every error code in src/core/errors.ts is documented in docs/errors.md with its HTTP status', () => {
  const page = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const table = /<!-- error-codes:start -->([\s\S]*)<!-- error-codes:end -->/.exec(page)?.[1];
  assert.ok(table !== undefined, 'docs/errors.md has the error-codes markers');
  for (const [code, { http, summary }] of Object.entries(errorCodes)) {
    assert.ok(table.includes(`| \`${code}\` | ${http} | ${summary} |`), `${code} (${http}) is in the docs/errors.md table`);
  }
});
