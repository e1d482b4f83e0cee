import type { LivenessState, NodeStatus, ReportClass } from './api/types.ts';

// Words, glyphs and numbers as people read them. Every status has a glyph and a word beside its
// colour, so colour is never the only signal (issue 11).

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

export const livenessGlyph: Readonly<Record<LivenessState, string>> = { connected: '●', disconnected: '○', 'never-seen': '◌' };

export const classMeaning: Readonly<Record<ReportClass, string>> = {
  matching: 'names the latest declaration',
  stale: 'names a declaration sent earlier than the latest',
  unknown: 'names a digest never sent to this node',
  undeclared: 'a legacy report naming no digest',
};

export const short = (digest: string | null | undefined, n = 10): string =>
  digest === null || digest === undefined ? '—' : digest.slice(0, n);

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  const s = ms / 1_000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/** Local date and time to the second (the page says which zone). */
export function time(iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

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
