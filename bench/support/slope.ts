// Least squares for a bench's series over time (bench/soak.ts): the slope, and whether the growth
// it implies over the window stands out of the samples' own scatter.

export type Line = Readonly<{ slope: number; intercept: number }>;

export function fitLine(xs: readonly number[], ys: readonly number[]): Line {
  const n = xs.length;
  if (n < 2) return { slope: 0, intercept: ys[0] ?? 0 };
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  const slope = sxx === 0 ? 0 : sxy / sxx;
  return { slope, intercept: my - slope * mx };
}

/**
 * Flat within noise: the growth over the window (slope × its length) is at most twice the
 * residuals' standard deviation, or 2% of the mean (a series too smooth to have noise).
 */
export function flatWithinNoise(
  line: Line,
  xs: readonly number[],
  ys: readonly number[],
): { flat: boolean; growth: number; noise: number } {
  const n = xs.length;
  const growth = n < 2 ? 0 : line.slope * (xs[n - 1]! - xs[0]!);
  const residuals = ys.map((y, i) => y - (line.intercept + line.slope * xs[i]!));
  const sd = Math.sqrt(residuals.reduce((a, r) => a + r * r, 0) / Math.max(1, n - 2));
  const mean = ys.reduce((a, b) => a + b, 0) / Math.max(1, n);
  const noise = Math.max(2 * sd, 0.02 * Math.abs(mean));
  return { flat: Math.abs(growth) <= noise, growth, noise };
}
