// YAML for `-o yaml`: an emitter for JSON-compatible values (what `-o json` prints), no parser.
// Written here rather than taken from a library because the CLI only ever writes YAML, and the
// rules for that are few: a string is written plain only when every YAML reader (1.1 as well as
// 1.2) reads it back as that same string, else double-quoted (a JSON string is a valid YAML
// double-quoted scalar); text of several lines is a literal block; empty maps and lists are {} and [].
// test/cli/yaml.test.ts reads every output back, with a reader of its own and real parsers.

const bigintSafe = (_k: string, x: unknown): unknown => (typeof x === 'bigint' ? x.toString() : x);

/** Words some YAML reader takes for a boolean or null (YAML 1.1 reads yes, no, on, off, y, n too). */
const reserved = new Set(['null', '~', 'true', 'false', 'yes', 'no', 'on', 'off', 'y', 'n']);

/**
 * Plain only when unmistakable: starts with a letter, `_` or `/` (no digit, sign or dot, so no
 * number, date or .inf; no indicator like - ? : , [ ] { } # & * ! | > ' " % @ `), has no `: `
 * or ` #`, does not end in `:` or a space, and is not a reserved word in any case.
 */
const plainSafe = (s: string): boolean =>
  /^[A-Za-z_/][A-Za-z0-9_./@+:()-]*(?: [A-Za-z0-9_./@+:()-]+)*$/.test(s) &&
  !s.includes(': ') &&
  !s.endsWith(':') &&
  !reserved.has(s.toLowerCase());

/** Characters YAML may not hold literally (outside its printable set) or that some readers take for a line break. */
const unprintable =
  // eslint-disable-next-line no-control-regex -- control characters are exactly what it finds
  /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const quoted = (s: string): string =>
  JSON.stringify(s).replace(/[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

const scalarString = (s: string): string => (plainSafe(s) ? s : quoted(s));

/** Text of several lines as a literal block, when a block holds it exactly; else null. */
function literalBlock(s: string, indent: string): string | null {
  if (!s.includes('\n') || s.includes('\r') || s.includes('\t') || unprintable.test(s)) return null;
  const body = s.replace(/\n+$/, '');
  // A first line that starts with a space or is empty would set the block's indentation wrongly.
  if (body === '' || body.startsWith(' ') || body.startsWith('\n')) return null;
  const trailing = s.length - body.length;
  const chomp = trailing === 0 ? '-' : trailing === 1 ? '' : '+';
  const lines = s.slice(0, trailing > 1 ? s.length - 1 : body.length).split('\n');
  return `|${chomp}\n${lines.map((l) => (l === '' ? '' : `${indent}${l}`)).join('\n')}`;
}

/** YAML 1.1 reads an exponent as a float only after a dot (1.0e+21; 1e+21 is a string there). */
const number = (n: number): string => {
  const s = JSON.stringify(n);
  return /^-?\d+e/.test(s) ? s.replace('e', '.0e') : s;
};

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A value after `key: ` or `- `, or at the top: either inline (scalar, {}, []) or lines indented by `indent`. */
function node(v: unknown, indent: string): { inline: string } | { block: string } {
  if (v === null) return { inline: 'null' };
  if (typeof v === 'boolean') return { inline: String(v) };
  if (typeof v === 'number') return { inline: number(v) };
  if (typeof v === 'string') {
    const block = literalBlock(v, indent);
    return { inline: block ?? scalarString(v) };
  }
  if (Array.isArray(v)) {
    if (v.length === 0) return { inline: '[]' };
    return { block: v.map((item) => `${indent}- ${nested(item, `${indent}  `)}`).join('\n') };
  }
  if (isMap(v)) {
    const entries = Object.entries(v);
    if (entries.length === 0) return { inline: '{}' };
    return {
      block: entries
        .map(([k, item]) => {
          const n = node(item, `${indent}  `);
          const key = scalarString(k);
          // An implicit key is at most 1024 characters long: a longer one is written after `? `.
          const head = key.length > 1000 ? `${indent}? ${key}\n${indent}:` : `${indent}${key}:`;
          return 'inline' in n ? `${head} ${n.inline}` : `${head}\n${n.block}`;
        })
        .join('\n'),
    };
  }
  throw new TypeError(`not a JSON value: ${typeof v}`);
}

/** After `- `: a map or list starts on the same line, its first line's indentation taken by the dash. */
function nested(v: unknown, indent: string): string {
  const n = node(v, indent);
  return 'inline' in n ? n.inline : n.block.slice(indent.length);
}

/** One YAML document for a JSON-compatible value (as JSON.stringify sees it: toJSON, undefined, NaN → null; bigint as a decimal string). */
export function toYaml(value: unknown): string {
  const json = JSON.stringify(value, bigintSafe);
  const v: unknown = json === undefined ? null : JSON.parse(json);
  // A literal block at the top is indented too: at column 0 a line `---` would end the document.
  const n = node(v, typeof v === 'string' ? '  ' : '');
  return `${'inline' in n ? n.inline : n.block}\n`;
}
