import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import fc from 'fast-check';
import { toYaml } from '../../src/cli/yaml.ts';
import { readYaml } from '../support/yamlReader.ts';

// `-o yaml` must read back as the value `-o json` prints. Checked three ways: exact text for the
// cases whose quoting matters; a property test through this repository's minimal reader
// (test/support/yamlReader.ts, which throws on anything outside the subset the emitter writes);
// and, where they are on the machine, two real parsers: the `yaml` package (YAML 1.2; in
// node_modules only as another package's dependency) and Python's PyYAML (YAML 1.1, which takes
// yes/no/on/off for booleans and needs a dot in a float). A parser that is missing is said, not hidden.

const normalized = (v: unknown): unknown =>
  JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)) ?? 'null') as unknown;

const cases: readonly (readonly [unknown, string])[] = [
  [null, 'null\n'],
  [true, 'true\n'],
  [0, '0\n'],
  [-1.5, '-1.5\n'],
  [1e21, '1.0e+21\n'],
  [5e-324, '5.0e-324\n'],
  ['', '""\n'],
  ['node-1', 'node-1\n'],
  ['http://127.0.0.1:15672/api', 'http://127.0.0.1:15672/api\n'],
  ['amqp://guest:***@host/', '"amqp://guest:***@host/"\n'],
  // Strings a reader would take for another type, or for syntax.
  ['yes', '"yes"\n'],
  ['Off', '"Off"\n'],
  ['~', '"~"\n'],
  ['null', '"null"\n'],
  ['123', '"123"\n'],
  ['0x1F', '"0x1F"\n'],
  ['1e3', '"1e3"\n'],
  ['.inf', '".inf"\n'],
  ['2024-05-01T10:00:00.000Z', '"2024-05-01T10:00:00.000Z"\n'],
  ['-', '"-"\n'],
  ['- a', '"- a"\n'],
  ['a: b', '"a: b"\n'],
  ['a #b', '"a #b"\n'],
  ['key:', '"key:"\n'],
  [' lead', '" lead"\n'],
  ['trail ', '"trail "\n'],
  ['*alias', '"*alias"\n'],
  ['!tag', '"!tag"\n'],
  ['{a}', '"{a}"\n'],
  ['say "hi"', '"say \\"hi\\""\n'],
  ['tab\there', '"tab\\there"\n'],
  ['nel\u0085 ls\u2028', '"nel\\u0085 ls\\u2028"\n'],
  ['é ünï', '"é ünï"\n'],
  // Several lines: a literal block, its chomping keeping the trailing newlines exactly.
  ['a\nb', '|-\n  a\n  b\n'],
  ['a\nb\n', '|\n  a\n  b\n'],
  ['a\n\nb\n\n\n', '|+\n  a\n\n  b\n\n\n'],
  ['  indented\nfirst', '"  indented\\nfirst"\n'],
  ['\nleading newline', '"\\nleading newline"\n'],
  ['crlf\r\nline', '"crlf\\r\\nline"\n'],
  // Empty collections, nesting, keys that need quoting.
  [[], '[]\n'],
  [{}, '{}\n'],
  [
    { a: [], b: {}, c: [1, [2, 3], { d: 'yes', e: 'x\ny' }] },
    'a: []\nb: {}\nc:\n  - 1\n  - - 2\n    - 3\n  - d: "yes"\n    e: |-\n      x\n      y\n',
  ],
  [{ on: 1, '': 2, 'a b': 3, '1': 4 }, '"1": 4\n"on": 1\n"": 2\na b: 3\n'],
  [[{ a: { b: [] } }], '- a:\n    b: []\n'],
  [{ big: 12345678901234567890n, skip: undefined, nan: Number.NaN }, 'big: "12345678901234567890"\nnan: null\n'],
];

test('toYaml writes the quoting and block forms expected', () => {
  for (const [value, expected] of cases) assert.equal(toYaml(value), expected, `for ${JSON.stringify(normalized(value))}`);
});

test('the minimal reader reads every expected case back as its JSON value', () => {
  for (const [value, expected] of cases) assert.deepEqual(readYaml(expected), normalized(value), expected);
});

const values = fc.jsonValue({ maxDepth: 4 });
const unicodeValues = fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' });
const awkwardStrings = fc.oneof(
  fc.constantFrom('yes', 'No', 'ON', 'y', 'N', 'null', '~', 'true', '.nan', '-.inf', '0o17', '1_000', '12:30', '2001-12-14', '<<', '='),
  fc.string({ unit: fc.constantFrom('a', ' ', ':', '#', '-', '\n', '\r', '\t', '"', "'", '\\', '|', '>', '0', '.', '\u0085', '\u2028') }),
);
const corpus = fc.oneof(values, unicodeValues, awkwardStrings, fc.dictionary(awkwardStrings, awkwardStrings), fc.array(awkwardStrings));

test('a key named __proto__ is read back as a key, as JSON.parse reads it (found by the property below, seed 226482908)', () => {
  const v = JSON.parse('{"__proto__":"","a":{"__proto__":{"b":1}}}') as unknown;
  assert.deepEqual(readYaml(toYaml(v)), v);
});

test('property: the minimal reader reads toYaml(v) back as v', () => {
  fc.assert(
    fc.property(corpus, (v) => {
      assert.deepEqual(readYaml(toYaml(v)), normalized(v));
    }),
    { numRuns: 2000 },
  );
});

const samples = (): unknown[] => [...cases.map(([v]) => v), ...fc.sample(corpus, { numRuns: 800, seed: 42 })];

test('the yaml package (YAML 1.2) reads toYaml(v) back as v', async (t) => {
  let parse: (s: string) => unknown;
  try {
    // Not a dependency of this repository: present (or not) through another package.
    ({ parse } = (await import('yaml')) as { parse: (s: string) => unknown });
  } catch {
    t.skip('the yaml package is not installed here: checked with the minimal reader only');
    return;
  }
  for (const v of samples()) assert.deepEqual(parse(toYaml(v)), normalized(v), toYaml(v));
});

test("Python's PyYAML (YAML 1.1) reads toYaml(v) back as v", (t) => {
  const docs = samples().map((v) => toYaml(v));
  const script = 'import sys, json, yaml\nfor d in json.load(sys.stdin): print(json.dumps(yaml.safe_load(d)))';
  const r = spawnSync('python3', ['-c', script], { input: JSON.stringify(docs), encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error !== undefined || /No module named/.test(r.stderr)) {
    t.skip('python3 with PyYAML is not on this machine: not checked against YAML 1.1');
    return;
  }
  assert.equal(r.status, 0, r.stderr);
  const read = r.stdout.trimEnd().split('\n');
  samples().forEach((v, k) => assert.deepEqual(JSON.parse(read[k]!), normalized(v), docs[k]));
});
