import type { LivenessState, NodeStatus, ReportClass, TimeoutHeld } from './api/types.ts';

// Words, glyphs and numbers as people read them. Every status has a glyph and a word beside its
// colour, so colour is never the only signal.

export const statusGlyph: Readonly<Record<NodeStatus, string>> = {
  converged: '✓',
  behind: '↻',
  degraded: '!',
  refused: '✕',
  undeclared: '–',
};

export const statusMeaning: Readonly<Record<NodeStatus, string>> = {
  converged: 'caught up: its latest report names the latest declaration, all applied',
  behind: 'not caught up: its latest report does not name the latest declaration',
  degraded: 'caught up, but some resources failed or are missing',
  refused: 'caught up, and it refused the declaration whole',
  undeclared: 'nothing has been sent to it yet',
};

export const livenessGlyph: Readonly<Record<LivenessState, string>> = {
  connected: '●',
  disconnected: '○',
  'never-seen': '◌',
  'not-observed': '?',
};

export const classMeaning: Readonly<Record<ReportClass, string>> = {
  matching: 'names the latest declaration',
  stale: 'names a declaration sent earlier than the latest',
  unknown: 'names a digest never sent to this node',
  undeclared: 'a legacy report naming no digest',
};

/** How many characters of a digest the pages show; the whole digest goes in a title beside it. */
export const digestLength = 12;

/** A digest as every page shows it: its first 12 characters (— for none). */
export const shortDigest = (digest: string | null | undefined): string =>
  digest === null || digest === undefined ? '—' : digest.slice(0, digestLength);

/** A duration as people read it; a negative one (two clocks read a moment apart) is 0 ms. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  const v = Math.max(0, ms);
  if (v < 1_000) return `${Math.round(v)} ms`;
  const s = v / 1_000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/**
 * Why a wave (or a rollback) open past its timeout decides nothing yet, in one line: the engine
 * driving rollouts holds it while no report can arrive (docs/design.md §8 "Timeouts while not
 * observed"). Null when not held, or not known (an engine that does not drive rollouts answered).
 */
export function timeoutHeldText(held: TimeoutHeld | null | undefined): string | null {
  if (held === null || held === undefined) return null;
  return held.until === null
    ? `Timeout held since ${time(held.since)}: no report can arrive; decided ${duration(held.graceMs)} after an engine observes again`
    : `Timeout held until ${time(held.until)} at least: observed again, the reports queued meanwhile still arriving`;
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/** Local date and time to the second (the page says which zone). */
export function time(iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** The date as ISO 8601 writes it (YYYY-MM-DD), local. */
export function day(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** HH:MM:SS, local. */
export function hms(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/**
 * Labels for time ticks (ms since epoch): HH:MM:SS, with the date (YYYY-MM-DD) above the first
 * tick and above any tick on a new day, so a chart never needs a locale's date format.
 */
export function timeTicks(ticks: readonly number[]): string[] {
  return ticks.map((t, i) => (i === 0 || day(t) !== day(ticks[i - 1]!) ? `${day(t)}\n${hms(t)}` : hms(t)));
}

/**
 * Tick steps for a time axis, in seconds: whole seconds up to whole days, so a short history
 * is not labelled in half seconds.
 */
export const timeTickSteps: readonly number[] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/** The shortest span the latency chart shows, in seconds: a few seconds of history is not stretched across the chart. */
export const minChartSpanSeconds = 60;

export function clock(iso: string | number | null | undefined): string {
  if (iso === null || iso === undefined) return '—';
  const d = new Date(iso);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export const count = (n: number): string => n.toLocaleString('en-US');

export const percent = (part: number, whole: number): string => (whole === 0 ? '—' : `${Math.floor((100 * part) / whole)} %`);

/** An ISO time or a decimal position, as the API's `at` takes it; null if neither. */
export function parseAtInput(text: string): string | null {
  const t = text.trim();
  if (/^\d{1,20}$/.test(t)) return t;
  if (!/^\d{4}-\d{2}-\d{2}/.test(t)) return null;
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

/** A performance mark, once per page load: bench/dashboard.ts reads them as "first render". */
const marked = new Set<string>();
export function markOnce(name: string): void {
  if (marked.has(name)) return;
  marked.add(name);
  performance.mark(name);
}
