import type { CliIo } from './io.ts';
import { toYaml } from './yaml.ts';

// Tables for people, JSON for programs (docs/design.md §7): a list is JSON lines, one object a line,
// so `converge status --json | jq` works on a fleet of any size without buffering it whole.

const json = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));

export const printJson = (io: CliIo, value: unknown): void => io.stdout(`${json(value)}\n`);
export const printJsonLines = (io: CliIo, values: Iterable<unknown>): void => {
  for (const v of values) io.stdout(`${json(v)}\n`);
};

/** Left-aligned columns, two spaces apart, header first. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

export const short = (digest: string | null | undefined): string => (digest === null || digest === undefined ? '-' : digest.slice(0, 12));

/** Key: value lines, for one object. */
export const pairs = (entries: readonly (readonly [string, string])[]): string => {
  const w = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n') + '\n';
};

/** Progress on stderr, only on a terminal and at most every 200 ms; `done()` clears the line. */
export function progress(io: CliIo, label: string): { update: (n: number, total: number | null) => void; done: () => void } {
  if (!io.stderrIsTTY) return { update: () => {}, done: () => {} };
  let last = 0;
  return {
    update(n, total) {
      const t = Date.now();
      if (t - last < 200) return;
      last = t;
      const pct = total !== null && total > 0 ? ` ${Math.min(100, Math.floor((n / total) * 100))}%` : '';
      io.stderr(`\r${label}: ${n.toLocaleString('en-US')}${total === null ? '' : ` / ${total.toLocaleString('en-US')}`}${pct}\u001b[K`);
    },
    done: () => io.stderr('\r\u001b[K'),
  };
}

/** `-o`: text is the default table or lines for people; json is `--json`. */
export const outputFormats = ['json', 'yaml', 'wide', 'name'] as const;
export type OutputFormat = 'text' | (typeof outputFormats)[number];

export type Listing<T> = Readonly<{
  headers: readonly string[];
  row: (item: T) => readonly string[];
  /** `-o wide`: more columns; without it, wide is the default table. */
  wide?: Readonly<{ headers: readonly string[]; row: (item: T) => readonly string[] }>;
  /** `-o name`: the item's id, one a line. */
  name: (item: T) => string;
  /** The value json and yaml print for an item (default the item). */
  value?: (item: T) => unknown;
}>;

/** A list in the format asked: json is one object a line; yaml one document holding the list. */
export function printList<T>(io: CliIo, output: OutputFormat, items: readonly T[], l: Listing<T>): void {
  const value = l.value ?? ((t: T): unknown => t);
  if (output === 'json') printJsonLines(io, items.map(value));
  else if (output === 'yaml') io.stdout(toYaml(items.map(value)));
  else if (output === 'name') io.stdout(items.map((t) => `${l.name(t)}\n`).join(''));
  else if (output === 'wide' && l.wide !== undefined) io.stdout(table(l.wide.headers, items.map(l.wide.row)));
  else io.stdout(table(l.headers, items.map(l.row)));
}

/** One object in the format asked; `-o wide` is the text, which already shows everything. */
export function printOne(io: CliIo, output: OutputFormat, value: unknown, shown: Readonly<{ text: () => string; name: string }>): void {
  if (output === 'json') printJson(io, value);
  else if (output === 'yaml') io.stdout(toYaml(value));
  else if (output === 'name') io.stdout(`${shown.name}\n`);
  else io.stdout(shown.text());
}
