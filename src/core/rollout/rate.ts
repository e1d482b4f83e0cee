import type { RolloutStartedData } from '../events/index.ts';

// Metered sends (docs/design.md §8 "Rate"): a plan's `rate` (a steady number of sends a minute)
// or `ramp` (a base rate multiplied by `factor` every `everyMs`, up to `cap` a minute) bounds how
// many nodes the rollout has sent to by each moment since its first wave opened, whatever its
// waves. Pure: the allowance is a function of the elapsed time, so a replay needs no clock.

export type Meter =
  Readonly<{ kind: 'rate'; perMinute: number }> | Readonly<{ kind: 'ramp'; base: number; factor: number; cap: number; everyMs: number }>;

export const meterOf = (started: Pick<RolloutStartedData, 'rate' | 'ramp'>): Meter | null =>
  started.rate !== undefined
    ? { kind: 'rate', perMinute: started.rate.perMinute }
    : started.ramp !== undefined
      ? { kind: 'ramp', ...started.ramp }
      : null;

/** Sends a minute during the step the elapsed time falls in. */
const rateAt = (m: Meter, elapsedMs: number): number =>
  m.kind === 'rate' ? m.perMinute : Math.min(m.cap, m.base * m.factor ** Math.floor(Math.max(0, elapsedMs) / m.everyMs));

/**
 * How many nodes may have been sent to by `elapsedMs` after the first wave opened: one at once,
 * then as the rate accrues (a ramp's steps each at their own rate).
 */
export function allowance(m: Meter, elapsedMs: number): number {
  const t = Math.max(0, elapsedMs);
  if (m.kind === 'rate') return 1 + Math.floor((m.perMinute * t) / 60_000);
  let sent = 0;
  let from = 0;
  // Step by step until the cap: past it the rate is steady, so the rest is one product.
  while (from + m.everyMs <= t && rateAt(m, from) < m.cap) {
    sent += (rateAt(m, from) * m.everyMs) / 60_000;
    from += m.everyMs;
  }
  return 1 + Math.floor(sent + (rateAt(m, from) * (t - from)) / 60_000);
}

/** The estimate moved to the exact first millisecond: the sums above round, `allowance` is the definition. */
function settle(m: Meter, n: number, at: number): number {
  let t = Math.max(0, at);
  while (t > 0 && allowance(m, t - 1) >= n) t--;
  while (allowance(m, t) < n) t++;
  return t;
}

/** The first elapsed time (ms) at which the allowance reaches `n` sends. */
export function allowedAt(m: Meter, n: number): number {
  if (n <= 1) return 0;
  if (m.kind === 'rate') return Math.ceil(((n - 1) * 60_000) / m.perMinute);
  // Walk the ramp's steps; within the step, the time its rate takes to the n-th send.
  let sent = 0;
  let from = 0;
  for (;;) {
    const r = rateAt(m, from);
    const step = (r * m.everyMs) / 60_000;
    if (r >= m.cap || sent + step >= n - 1) return settle(m, n, from + Math.ceil(((n - 1 - sent) * 60_000) / r));
    sent += step;
    from += m.everyMs;
  }
}
