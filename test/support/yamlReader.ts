// A reader for the YAML that src/cli/yaml.ts writes, and only that: block maps and lists indented
// by two, `? ` keys, [] and {}, double-quoted (JSON) strings, literal blocks with their chomping,
// and plain scalars resolved as YAML 1.2's core schema resolves them. Anything else throws, so a
// test that reads the emitter's output back also catches it writing something outside the subset.

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const indentOf = (line: string): number => line.length - line.trimStart().length;

function plain(s: string): Json {
  if (/^(null|Null|NULL|~)?$/.test(s)) return null;
  if (/^(true|True|TRUE)$/.test(s)) return true;
  if (/^(false|False|FALSE)$/.test(s)) return false;
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(s)) return Number(s);
  if (/^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$/.test(s)) throw new Error(`reader: ${s} is not JSON`);
  if (/^[-?:,[\]{}#&*!|>'"%@`]/.test(s) || / #|: |:$/.test(s) || s !== s.trim())
    throw new Error(`reader: ${JSON.stringify(s)} is not a plain scalar`);
  return s;
}

/** A double-quoted scalar at the start of `s`: its value and the rest of `s`. */
function quotedAt(s: string): [string, string] {
  let i = 1;
  while (i < s.length && s[i] !== '"') i += s[i] === '\\' ? 2 : 1;
  if (i >= s.length) throw new Error(`reader: unterminated string ${s}`);
  return [JSON.parse(s.slice(0, i + 1)) as string, s.slice(i + 1)];
}

export function readYaml(text: string): Json {
  if (!text.endsWith('\n')) throw new Error('reader: a document ends with a newline');
  const lines = text.slice(0, -1).split('\n');
  let i = 0;

  const scalarOrBlock = (rest: string, parentIndent: number): Json => {
    if (rest === '[]') return [];
    if (rest === '{}') return {};
    if (rest.startsWith('"')) {
      const [v, after] = quotedAt(rest);
      if (after !== '') throw new Error(`reader: text after a string: ${after}`);
      return v;
    }
    const block = /^\|([-+]?)$/.exec(rest);
    if (block !== null) {
      const body: string[] = [];
      let at = -1;
      while (i < lines.length && (lines[i] === '' || indentOf(lines[i]!) > parentIndent)) {
        const l = lines[i++]!;
        if (l !== '' && at < 0) at = indentOf(l);
        body.push(l === '' ? '' : l.slice(at));
      }
      const content = body.join('\n').replace(/\n+$/, '');
      const trailingEmpty = body.length - 1 - body.map((l) => l !== '').lastIndexOf(true);
      if (block[1] === '-') return content;
      if (block[1] === '') return `${content}\n`;
      return `${content}\n${'\n'.repeat(trailingEmpty)}`;
    }
    return plain(rest);
  };

  /** The value after `key:` or `- ` (rest is what follows on the line), at a line indented `indent`. */
  const valueAfter = (rest: string, indent: number): Json => {
    if (rest !== '') return scalarOrBlock(rest, indent);
    if (i >= lines.length || indentOf(lines[i]!) <= indent) {
      // A list may sit at its key's indentation in other writers' YAML; this one indents it.
      throw new Error(`reader: line ${i + 1}: a key with no value`);
    }
    return blockAt(indentOf(lines[i]!));
  };

  const blockAt = (indent: number): Json => {
    const first = lines[i]!.slice(indent);
    if (first === '-' || first.startsWith('- ')) {
      const list: Json[] = [];
      while (i < lines.length && indentOf(lines[i]!) === indent && /^- |^-$/.test(lines[i]!.slice(indent))) {
        const rest = lines[i]!.slice(indent + 2);
        if (
          /^- |^-$/.test(rest) ||
          (!rest.startsWith('"') && /^[^|[{].*?(: |:$)/.test(rest)) ||
          /^"(?:[^"\\]|\\.)*":( |$)/.test(rest) ||
          rest.startsWith('? ')
        ) {
          // A nested list or map begun on the dash's line: read it as if indented past the dash.
          lines[i] = `${' '.repeat(indent + 2)}${rest}`;
          list.push(blockAt(indent + 2));
        } else {
          i++;
          list.push(scalarOrBlock(rest, indent));
        }
      }
      return list;
    }
    const map: { [k: string]: Json } = {};
    while (i < lines.length && indentOf(lines[i]!) === indent) {
      let line = lines[i++]!.slice(indent);
      let key: string;
      if (line.startsWith('? ')) {
        const k = scalarOrBlock(line.slice(2), indent);
        if (typeof k !== 'string') throw new Error('reader: a key is a string');
        key = k;
        line = lines[i++]!.slice(indent);
        if (!line.startsWith(':')) throw new Error('reader: `? key` without its `:`');
        line = line.slice(1);
      } else if (line.startsWith('"')) {
        [key, line] = quotedAt(line);
        if (!line.startsWith(':')) throw new Error(`reader: line ${i}: no colon after a key`);
        line = line.slice(1);
      } else {
        const m = /^(.*?)(?:: |:$)(.*)$/.exec(line);
        if (m === null) throw new Error(`reader: line ${i}: not a key: value`);
        const k = plain(m[1]!);
        if (typeof k !== 'string') throw new Error(`reader: line ${i}: key ${m[1]} is not a string`);
        key = k;
        line = line.endsWith(':') && m[2] === '' ? '' : ` ${m[2]!}`;
      }
      if (line !== '' && !line.startsWith(' ')) throw new Error(`reader: line ${i}: no space after a colon`);
      if (Object.hasOwn(map, key)) throw new Error(`reader: duplicate key ${key}`);
      // As JSON.parse does: `__proto__` is a key like any other, not the object's prototype.
      Object.defineProperty(map, key, {
        value: valueAfter(line.trimStart(), indent),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return map;
  };

  const top = lines[0]!;
  let v: Json;
  if (
    /^- |^-$/.test(top) ||
    (!top.startsWith('"') && /^[^|[{].*?(: |:$)/.test(top)) ||
    /^"(?:[^"\\]|\\.)*":( |$)/.test(top) ||
    top.startsWith('? ')
  )
    v = blockAt(0);
  else {
    i = 1;
    v = scalarOrBlock(top, -1);
  }
  if (i !== lines.length) throw new Error(`reader: line ${i + 1} left over: ${lines[i]}`);
  return v;
}
