import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { statementName } from '../../src/store/postgres/schema.ts';

// PostgreSQL cuts identifiers at 63 bytes, and `pg` printed a three-line warning (not JSON, to
// stdout) for every prepared statement whose name was longer: a long schema name made each
// statement's name too long. Every name the adapter prepares is collected from its source.

const dir = new URL('../../src/store/postgres/', import.meta.url);
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.ts'))
  .flatMap((f) => [...readFileSync(new URL(f, dir), 'utf8').matchAll(/\bstatement\(\s*'([a-z_]+)'/g)].map((m) => m[1]!));

test('the adapter prepares statements, each under a name of its own', () => {
  assert.ok(names.length >= 10, `found ${names.length} statements`);
  assert.deepEqual(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
  );
});

test('every prepared statement name fits in 63 characters and stays unique, whatever the schema', () => {
  const longest = 'a'.repeat(50);
  const schemas = ['converge', longest, `${'a'.repeat(49)}b`, 'converge_test_0123abcd'];
  const all = schemas.flatMap((s) => names.map((n) => statementName(n, s)));
  for (const name of all) assert.ok(name.length <= 63, `${name} is ${name.length} characters`);
  assert.equal(new Set(all).size, all.length, 'no two statements (of any two schemas) share a name');
  assert.equal(statementName('head', 'converge'), 'converge_head_converge', 'a short name reads as before');
});
