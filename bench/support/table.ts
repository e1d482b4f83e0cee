// The shapes a benchmark hands to the runner (JSON lines, see report.ts) and the one table both
// stdout and BENCHMARKS.md show: a Markdown table padded so it also reads well in a terminal.

/** A target on the ratio converge/baseline, or on Converge's figure itself (in the row's unit). */
export type Goal = { ratioAtLeast: number } | { ratioAtMost: number } | { atLeast: number } | { atMost: number };

export type RowRecord = {
  name: string;
  unit: string;
  better: 'higher' | 'lower';
  /** Best pass of each side. */
  converge: number;
  baseline: number | null;
  /** converge / baseline, whichever way is better. */
  ratio: number | null;
  passes: number;
  /** (max − min) / best over the passes; null with one pass. */
  spread: { converge: number | null; baseline: number | null };
  goal: Goal | null;
  notes: string;
  headline: boolean;
};

export type Line = { kind: 'bench'; title: string; about: string } | ({ kind: 'row' } & RowRecord) | { kind: 'note'; text: string };

export function goalMet(r: RowRecord): boolean | null {
  const g = r.goal;
  if (g === null) return null;
  if ('ratioAtLeast' in g) return r.ratio !== null && r.ratio >= g.ratioAtLeast;
  if ('ratioAtMost' in g) return r.ratio !== null && r.ratio <= g.ratioAtMost;
  if ('atLeast' in g) return r.converge >= g.atLeast;
  return r.converge <= g.atMost;
}

export function goalText(r: RowRecord): string {
  const g = r.goal;
  if (g === null) return '';
  const text =
    'ratioAtLeast' in g
      ? `ratio ≥ ${g.ratioAtLeast}`
      : 'ratioAtMost' in g
        ? `ratio ≤ ${g.ratioAtMost}`
        : 'atLeast' in g
          ? `≥ ${formatNumber(g.atLeast)} ${r.unit}`
          : `≤ ${formatNumber(g.atMost)} ${r.unit}`;
  return `${text} ${goalMet(r) ? '✓' : '✗'}`;
}

/** Integers with thousands separators from 100 up; three significant digits below. */
export function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Math.abs(x) >= 100) return Math.round(x).toLocaleString('en-US');
  return Number(x.toPrecision(3)).toString();
}

/** Two decimals, or three where two would round across the goal (0.798 shown as 0.80 against ≥ 0.8). */
function ratioText(r: RowRecord): string {
  if (r.ratio === null) return '—';
  const two = r.ratio.toFixed(2);
  const met = goalMet(r);
  if (met === null || r.goal === null || !('ratioAtLeast' in r.goal || 'ratioAtMost' in r.goal)) return two;
  return goalMet({ ...r, ratio: Number(two) }) === met ? two : r.ratio.toFixed(3);
}

const percent = (x: number | null): string => (x === null ? '—' : `${Math.round(x * 100)}%`);

function passesText(r: RowRecord): string {
  if (r.passes < 2) return '1 pass';
  const spread = r.baseline === null ? percent(r.spread.converge) : `${percent(r.spread.converge)} / ${percent(r.spread.baseline)}`;
  return `best of ${r.passes}, spread ${spread}`;
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function renderTable(rows: readonly RowRecord[]): string {
  const header = ['measurement', 'Converge', 'baseline', 'ratio', 'goal', 'passes (spread converge / baseline)', 'notes'];
  const body = rows.map((r) => [
    r.name,
    `${formatNumber(r.converge)} ${r.unit}`,
    r.baseline === null ? '—' : `${formatNumber(r.baseline)} ${r.unit}`,
    ratioText(r),
    goalText(r),
    passesText(r),
    r.notes,
  ]);
  const all = [header, ...body].map((cols) => cols.map(cell));
  const widths = header.map((_, i) => Math.max(3, ...all.map((cols) => cols[i]!.length)));
  const right = new Set([1, 2, 3]);
  const line = (cols: readonly string[]): string =>
    `| ${cols.map((c, i) => (right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (right.has(i) ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  return [line(all[0]!), rule, ...all.slice(1).map(line)].join('\n');
}
