import { parseArgs } from 'node:util';
import { ConvergeError } from '../core/errors.ts';

// The command line of one command, read with node:util's parseArgs in its lenient mode and then
// checked here, because its strict mode's messages were what a new user tripped on:
// "Option '--store' argument is ambiguous" for a flag missing its value, an unknown flag's text
// cut off mid-sentence, no "did you mean". Every mistake is one line, a CONVERGE_ERR_USAGE.

export type Flag = Readonly<{
  type: 'string' | 'boolean';
  /** What the value looks like (`<n>`, `on|off`), for messages and help. */
  value?: string;
  short?: string;
}>;

export type Parsed = Readonly<{
  values: Readonly<Record<string, string | boolean | undefined>>;
  positionals: readonly string[];
}>;

const usage = (message: string): ConvergeError => new ConvergeError('CONVERGE_ERR_USAGE', message);

/** Looks like a flag rather than a value: `--json`, `-h`; not `-4` or `-`. */
const looksLikeFlag = (arg: string): boolean => /^--?[a-z]/i.test(arg);

/** Levenshtein distance, for "did you mean". */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** The closest of `candidates` to `word` if it is close enough to be a typo (or `word` is a prefix of it), else null. */
export function closest(word: string, candidates: Iterable<string>): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = c.startsWith(word) && word.length >= 2 ? 0.5 : editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return bestDistance <= Math.max(1, Math.floor(word.length / 3)) ? best : null;
}

/** `command` names the command in messages (`status`); `flags` are every flag it takes. */
export function parseCommandLine(command: string, args: readonly string[], flags: Readonly<Record<string, Flag>>): Parsed {
  const { tokens } = parseArgs({
    args: [...args],
    options: Object.fromEntries(
      Object.entries(flags).map(([name, f]) => [name, f.short === undefined ? { type: f.type } : { type: f.type, short: f.short }]),
    ),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const values: Record<string, string | boolean | undefined> = {};
  const positionals: string[] = [];
  for (const t of tokens) {
    if (t.kind === 'positional') {
      positionals.push(t.value);
      continue;
    }
    if (t.kind === 'option-terminator') continue;
    const flag = flags[t.name];
    if (flag === undefined) {
      const guess = closest(t.name, Object.keys(flags));
      throw usage(
        `${command} has no flag ${t.rawName}${guess === null ? '' : `; did you mean --${guess}?`} (converge ${command} --help lists them)`,
      );
    }
    if (flag.type === 'boolean') {
      if (t.inlineValue === true) throw usage(`${t.rawName} takes no value (got ${JSON.stringify(t.value)})`);
      values[t.name] = true;
      continue;
    }
    const shape = flag.value ?? '<value>';
    if (t.value === undefined) throw usage(`${t.rawName} needs a value: ${t.rawName} ${shape}`);
    if (t.inlineValue !== true && looksLikeFlag(t.value)) {
      throw usage(`${t.rawName} needs a value, but the next argument is the flag ${t.value}: ${t.rawName} ${shape}`);
    }
    values[t.name] = t.value;
  }
  return { values, positionals };
}
