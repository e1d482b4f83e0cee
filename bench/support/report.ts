// One way for every benchmark to say what it measured. A bench builds a
// report, adds rows — Converge's figure beside a baseline measured in the same run — and ends it:
// the rows print as a table on stdout, and when the runner (scripts/bench.mjs) sets
// CONVERGE_BENCH_OUT they are also appended to that file as JSON lines, from which
// `npm run bench -- --report` writes BENCHMARKS.md. The convention is written down in bench/README.md.
import { appendFileSync } from 'node:fs';
import { renderTable } from './table.ts';
import type { Goal, Line, RowRecord } from './table.ts';

export type { Goal } from './table.ts';

/** One figure, or one per pass (best of them is reported, with the spread between passes). */
export type Figure = number | readonly number[];

export type Row = {
  /** What was measured, e.g. `append, batches of 100`. */
  name: string;
  /** Unit of both figures, e.g. `events/s`, `ms`, `MiB`. */
  unit: string;
  converge: Figure;
  /** The same work done by the baseline in the same run (omit when the row has none). */
  baseline?: Figure;
  /** Which way is better; decides which pass is "best". Default: higher (throughput). */
  better?: 'higher' | 'lower';
  /** The target, on the ratio converge/baseline or on the figure itself. */
  goal?: Goal;
  notes?: string;
  /** Shown at the top of BENCHMARKS.md (the one figure a reader should see first). */
  headline?: boolean;
};

export type BenchReport = {
  row(row: Row): void;
  /** A line printed under the table (a setting, a caveat, a figure that is not a row). */
  note(text: string): void;
  /** Prints the table and hands the rows to the runner. Call once, at the end. */
  end(): void;
};

/** `title`: the heading; `about`: what is measured against which baseline, in a sentence or two. */
export function createBenchReport(title: string, about: string): BenchReport {
  const rows: RowRecord[] = [];
  const notes: string[] = [];
  let ended = false;
  return {
    row(r) {
      rows.push(toRecord(r));
    },
    note(text) {
      notes.push(text);
    },
    end() {
      if (ended) throw new Error('bench report ended twice');
      ended = true;
      process.stdout.write(`\n### ${title}\n\n${about}\n\n${renderTable(rows)}\n${notes.map((n) => `\n${n}`).join('')}\n`);
      const out = process.env['CONVERGE_BENCH_OUT'];
      if (out === undefined || out === '') return;
      const lines: Line[] = [
        { kind: 'bench', title, about },
        ...rows.map((row): Line => ({ kind: 'row', ...row })),
        ...notes.map((text): Line => ({ kind: 'note', text })),
      ];
      appendFileSync(out, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    },
  };
}

function toRecord(r: Row): RowRecord {
  const better = r.better ?? 'higher';
  const pick = (xs: readonly number[]): number => (better === 'higher' ? Math.max(...xs) : Math.min(...xs));
  const samples = (f: Figure): readonly number[] => (typeof f === 'number' ? [f] : f);
  const cs = samples(r.converge);
  const bs = r.baseline === undefined ? null : samples(r.baseline);
  if (cs.length === 0 || (bs !== null && bs.length === 0)) throw new Error(`bench row ${r.name}: no figures`);
  const converge = pick(cs);
  const baseline = bs === null ? null : pick(bs);
  // Spread: how far apart the passes were, relative to the best; says how much to trust a ratio
  // taken on a shared machine.
  const spread = (xs: readonly number[]): number | null => (xs.length < 2 ? null : (Math.max(...xs) - Math.min(...xs)) / pick(xs));
  return {
    name: r.name,
    unit: r.unit,
    better,
    converge,
    baseline,
    ratio: baseline === null || baseline === 0 ? null : converge / baseline,
    passes: cs.length,
    spread: { converge: spread(cs), baseline: bs === null ? null : spread(bs) },
    goal: r.goal ?? null,
    notes: r.notes ?? '',
    headline: r.headline ?? false,
  };
}
