import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { minChartSpanSeconds, time, timeTicks, timeTickSteps } from '../format.ts';

// Convergence latency over time (p50, p90, p99), drawn by uPlot on a canvas. The numbers are in
// the text beside it; this is the shape of them. Series differ by dash pattern as well as colour.

export type LatencyPoint = Readonly<{ t: number; p50: number | null; p90: number | null; p99: number | null }>;

const css = (name: string): string => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';

export function Sparkline({ points, label }: { points: readonly LatencyPoint[]; label: string }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const host = el.current;
    if (host === null) return undefined;
    const opts: uPlot.Options = {
      width: Math.max(240, host.clientWidth),
      height: 120,
      legend: { show: true, live: false },
      cursor: { show: true, drag: { x: false, y: false } },
      scales: {
        // At least a minute wide, ending at the newest point: a few seconds of history would
        // otherwise be stretched across the chart and labelled in fractions of a second.
        x: { time: true, range: (_u, lo, hi) => (lo == null || hi == null ? [lo, hi] : [Math.min(lo, hi - minChartSpanSeconds), hi]) },
        y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.1] },
      },
      axes: [
        {
          stroke: css('--muted'),
          grid: { show: false },
          ticks: { stroke: css('--line') },
          font: '11px system-ui',
          // ISO-style labels (HH:MM:SS, the date as YYYY-MM-DD) at whole-second steps, not uPlot's locale formats.
          incrs: [...timeTickSteps],
          space: 70,
          size: 44,
          values: (_u, splits) => timeTicks(splits.map((x) => x * 1000)),
        },
        {
          stroke: css('--muted'),
          grid: { stroke: css('--line'), width: 1 },
          size: 56,
          font: '11px system-ui',
          values: (_u, v) => v.map((x) => (x >= 1000 ? `${(x / 1000).toFixed(1)} s` : `${Math.round(x)} ms`)),
        },
      ],
      series: [
        { value: (_u, x) => (x == null ? '—' : time(new Date(x * 1000).toISOString())) },
        { label: 'p50', stroke: css('--accent'), width: 2, spanGaps: true, points: { show: false } },
        { label: 'p90', stroke: css('--warn'), width: 1.5, dash: [6, 3], spanGaps: true, points: { show: false } },
        { label: 'p99', stroke: css('--bad'), width: 1.5, dash: [2, 3], spanGaps: true, points: { show: false } },
      ],
    };
    plot.current = new uPlot(opts, [[], [], [], []], host);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(240, host.clientWidth), height: 120 }));
    resize.observe(host);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    const sorted = [...points].sort((a, b) => a.t - b.t);
    plot.current?.setData([sorted.map((p) => p.t / 1000), sorted.map((p) => p.p50), sorted.map((p) => p.p90), sorted.map((p) => p.p99)]);
  }, [points]);
  return <div class="sparkline" ref={el} role="img" aria-label={label} />;
}
